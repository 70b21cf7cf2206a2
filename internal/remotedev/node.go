package remotedev

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nodeRole is the role of a node child; its argument is the path of the
// Unix socket it serves its control connection on.
const nodeRole = "remotedev-node"

// NodeStartTimeout bounds the start of a node child, and how long a node
// child waits for its control connection.
const NodeStartTimeout = 10 * time.Second

// nodeOptions are the options node children serve with (set by TestMain).
var nodeOptions []Option

func init() { Role(nodeRole, runNode) }

// runNode is the main of a node child: it listens on path, says "ready"
// on stdout, serves the first control connection and exits when that
// connection closes, on SIGTERM, or when no connection comes within
// NodeStartTimeout (the parent died while starting it).
func runNode(path string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ul, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	l := &acceptWatcher{Listener: ul, accepted: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.accepted:
		case <-time.After(NodeStartTimeout):
			cancel()
		}
	}()
	fmt.Println("ready")
	opts := append([]Option{SingleConn()}, nodeOptions...)
	if err := Serve(ctx, l, opts...); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	return 0
}

// acceptWatcher closes accepted at its first successful Accept.
type acceptWatcher struct {
	net.Listener
	once     sync.Once
	accepted chan struct{}
}

func (l *acceptWatcher) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.once.Do(func() { close(l.accepted) })
	}
	return c, err
}

// Node is a node child (the test binary re-executed by StartNode, serving
// devices) and the Client controlling it.
type Node struct {
	// Client opens devices in the node.
	Client *Client
	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
	err    error // cmd.Wait's result, once exited is closed
}

// StartNode re-executes the test binary as a node child and connects to
// it. The test binary's TestMain must be TestMain.
func StartNode() (_ *Node, err error) {
	dir, err := os.MkdirTemp("", "rdmakit-node-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "ctl.sock")
	cmd, err := Command(nodeRole, path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	n := &Node{cmd: cmd, dir: dir, exited: make(chan struct{})}
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := n.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() {
		n.err = n.cmd.Wait()
		close(n.exited)
	}()
	defer func() {
		if err != nil {
			n.Kill()
		}
	}()
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("node said %q", line)
		}
		ready <- err
		io.Copy(io.Discard, stdout)
	}()
	timer := time.NewTimer(NodeStartTimeout)
	defer timer.Stop()
	select {
	case err := <-ready:
		if err != nil {
			return nil, fmt.Errorf("node process did not start: %w", err)
		}
	case <-timer.C:
		return nil, fmt.Errorf("node process not ready after %v", NodeStartTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), NodeStartTimeout)
	defer cancel()
	if n.Client, err = Dial(ctx, path); err != nil {
		return nil, err
	}
	return n, nil
}

// Process is the node's process (to signal it).
func (n *Node) Process() *os.Process { return n.cmd.Process }

// Exited is closed once the node's process has exited.
func (n *Node) Exited() <-chan struct{} { return n.exited }

// ProcessState is the node's exit state; call it after Exited is closed.
func (n *Node) ProcessState() *os.ProcessState { return n.cmd.ProcessState }

// Kill ends the process with SIGKILL and waits for it.
func (n *Node) Kill() {
	n.cmd.Process.Kill()
	<-n.exited
	if n.Client != nil {
		n.Client.Close()
	}
	os.RemoveAll(n.dir)
}

// Stop closes the control connection, which makes the node exit; a node
// that does not exit in time is killed.
func (n *Node) Stop() error {
	n.Client.Close()
	select {
	case <-n.exited:
	case <-time.After(NodeStartTimeout):
		n.Kill()
		return errors.New("node process did not exit after its connection closed")
	}
	os.RemoveAll(n.dir)
	return n.err
}

// SharedNode is one node child shared by the tests of a binary: started on
// first use and stopped by TestMain after the tests.
type SharedNode struct {
	once sync.Once
	n    *Node
	err  error
}

// Get returns the shared node, starting it on first use; it fails t if
// the node could not be started.
func (s *SharedNode) Get(t testing.TB) *Node {
	t.Helper()
	s.once.Do(func() {
		s.n, s.err = StartNode()
		if s.err == nil {
			onExit(s.stop)
		}
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	if s.n == nil {
		t.Fatal("node process did not start (an earlier attempt failed)")
	}
	return s.n
}

func (s *SharedNode) stop() {
	if err := s.n.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "node process:", err)
	}
}
