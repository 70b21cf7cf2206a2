package shm_test

import (
	"bufio"
	"context"
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

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

// nodeMode is the child mode of a node process; its argument is the path
// of the Unix socket it serves its remotedev control connection on.
const nodeMode = "node"

// nodeStartTimeout bounds the start of a node process, and how long a node
// waits for its control connection.
const nodeStartTimeout = 10 * time.Second

func init() {
	childModes[nodeMode] = runNode
	afterTests = append(afterTests, sharedNode.stop)
}

// runNode is the main of a node process: it listens on path, says "ready"
// on stdout, serves the first control connection and exits when that
// connection closes, on SIGTERM, or when no connection comes within
// nodeStartTimeout (the parent died while starting it).
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
		case <-time.After(nodeStartTimeout):
			cancel()
		}
	}()
	fmt.Println("ready")
	if err := remotedev.Serve(ctx, l, remotedev.SingleConn(), remotedev.WithCrash(shm.Crash)); err != nil {
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

// node is a node process and the client controlling it.
type node struct {
	cmd    *exec.Cmd
	client *remotedev.Client
	dir    string
	exited chan struct{}
	err    error // cmd.Wait's result, once exited is closed
}

// startNode re-executes the test binary as a node process.
func startNode(t testing.TB) (_ *node, err error) {
	dir, err := os.MkdirTemp("", "rdmakit-shm-node-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "ctl.sock")
	n := &node{cmd: childCommand(t, nodeMode, path), dir: dir, exited: make(chan struct{})}
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
			n.kill()
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
	timer := time.NewTimer(nodeStartTimeout)
	defer timer.Stop()
	select {
	case err := <-ready:
		if err != nil {
			return nil, fmt.Errorf("node process did not start: %w", err)
		}
	case <-timer.C:
		return nil, fmt.Errorf("node process not ready after %v", nodeStartTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeStartTimeout)
	defer cancel()
	if n.client, err = remotedev.Dial(ctx, path); err != nil {
		return nil, err
	}
	return n, nil
}

// kill ends the process with SIGKILL and waits for it.
func (n *node) kill() {
	n.cmd.Process.Kill()
	<-n.exited
	if n.client != nil {
		n.client.Close()
	}
	os.RemoveAll(n.dir)
}

// stop closes the control connection, which makes the node exit; a node
// that does not exit in time is killed.
func (n *node) stop() error {
	n.client.Close()
	select {
	case <-n.exited:
	case <-time.After(nodeStartTimeout):
		n.kill()
		return fmt.Errorf("node process did not exit after its connection closed")
	}
	os.RemoveAll(n.dir)
	return n.err
}

// sharedNodeProcess is the node process of the cross-process conformance
// run, started on first use and stopped after the tests.
type sharedNodeProcess struct {
	once sync.Once
	n    *node
	err  error
}

var sharedNode sharedNodeProcess

func (s *sharedNodeProcess) get(t testing.TB) *node {
	t.Helper()
	s.once.Do(func() { s.n, s.err = startNode(t) })
	if s.err != nil {
		t.Fatal(s.err)
	}
	if s.n == nil {
		t.Fatal("node process did not start (an earlier attempt failed)")
	}
	return s.n
}

func (s *sharedNodeProcess) stop() {
	if s.n != nil {
		if err := s.n.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "node process:", err)
		}
	}
}

// crossProcess opens device 0 in this process and devices 1…n-1 in a node
// process, driven through remotedev proxies: their NICs, rings and
// sessions live in the other process, and their memory regions (memfds,
// as every shm region is) are mapped here too.
type crossProcess struct {
	node func(t testing.TB) *node
}

func (crossProcess) Name() string { return "shm (cross-process)" }

func (p crossProcess) Open(t testing.TB, n int) []verbs.Device {
	t.Helper()
	devs := make([]verbs.Device, n)
	for i := range devs {
		uri := "shm://" + uniqueName("xproc")
		var d verbs.Device
		var err error
		if i == 0 {
			d, err = verbs.Open(uri)
		} else {
			d, err = p.node(t).client.Open(uri)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs[i] = d
	}
	return devs
}

var _ verbstest.Killer = crossProcess{}

// Kill implements verbstest.Killer: shm.Crash, run in the device's
// process.
func (crossProcess) Kill(t testing.TB, d verbs.Device) {
	crash := shm.Crash
	if remotedev.IsProxy(d) {
		crash = remotedev.Crash
	}
	if err := crash(d); err != nil {
		t.Fatal(err)
	}
}

func TestConformanceCrossProcess(t *testing.T) {
	verbstest.Run(t, crossProcess{node: sharedNode.get})
}
