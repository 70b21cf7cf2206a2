package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/rdmakit/rdmakit/memnode"
)

// ErrNoNode is returned by experiments that need an rdmakit node in
// another process when Options.Node is not set.
var ErrNoNode = errors.New("bench: no way to start an rdmakit node (Options.Node); run the experiment through the rdmakit command")

// nodeProc is an rdmakit node running in its own process.
type nodeProc struct {
	memnode.Info // what the node announced
	cmd          *exec.Cmd
	done         chan error
}

// startNode starts `rdmakit node` on free loopback ports and waits for it
// to print its description.
func startNode(ctx context.Context, env *Env, args ...string) (*nodeProc, error) {
	if env.Node == nil {
		return nil, ErrNoNode
	}
	args = append([]string{"--uri", "tcp://127.0.0.1:0", "--cm", "127.0.0.1:0", "--metrics", ""}, args...)
	cmd := env.Node(ctx, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start node: %w", err)
	}
	n := &nodeProc{cmd: cmd, done: make(chan error, 1)}
	type result struct {
		info memnode.Info
		err  error
	}
	announced := make(chan result, 1)
	go func() {
		info, err := memnode.ReadInfo(out, nil)
		announced <- result{info, err}
		io.Copy(io.Discard, out) // the rest of its output
	}()
	go func() { n.done <- cmd.Wait() }()
	select {
	case r := <-announced:
		if r.err == nil && r.info.CM != "" {
			n.Info = r.info
			return n, nil
		}
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	n.stop()
	return nil, fmt.Errorf("bench: the node did not describe itself")
}

// cpu returns the node's user+system CPU time so far, from /proc.
func (n *nodeProc) cpu() (time.Duration, error) { return ProcCPU(n.cmd.Process.Pid) }

// stop ends the node with SIGINT (its graceful shutdown), then kills it.
func (n *nodeProc) stop() {
	if n.cmd.Process == nil {
		return
	}
	n.cmd.Process.Signal(os.Interrupt)
	select {
	case <-n.done:
	case <-time.After(5 * time.Second):
		n.cmd.Process.Kill()
		<-n.done
	}
}
