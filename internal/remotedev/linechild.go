package remotedev

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// LineTimeout bounds how long Child.Expect waits for a line.
const LineTimeout = 20 * time.Second

// Child is a child playing a role of the test's own (registered with
// Role), spoken to in lines on its stdin and stdout. Its methods return
// errors rather than failing a test, so any goroutine can drive it.
type Child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	exited chan struct{}
}

// StartChild starts the test binary as a child playing role with arg.
// configure, if given, adjusts the command before it starts (ExtraFiles,
// say).
func StartChild(role, arg string, configure ...func(*exec.Cmd)) (*Child, error) {
	cmd, err := Command(role, arg)
	if err != nil {
		return nil, err
	}
	for _, f := range configure {
		f(cmd)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("remotedev: child %s: %w", role, err)
	}
	// A child says a few lines at a time and each is awaited, so the
	// buffer never fills and the reader always reaches Wait.
	c := &Child{cmd: cmd, in: in, lines: make(chan string, 64), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		_ = cmd.Wait() // after stdout is drained: Wait closes the pipe
		close(c.exited)
	}()
	return c, nil
}

// Process is the child's process (to signal it).
func (c *Child) Process() *os.Process { return c.cmd.Process }

// Exited is closed once the child has exited.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Say writes line to the child's stdin.
func (c *Child) Say(line string) error {
	_, err := fmt.Fprintln(c.in, line)
	return err
}

// CloseInput closes the child's stdin.
func (c *Child) CloseInput() error { return c.in.Close() }

// Expect reads the child's next line, which must start with prefix, and
// returns its fields after the first.
func (c *Child) Expect(prefix string) ([]string, error) {
	select {
	case l, ok := <-c.lines:
		if !ok || !strings.HasPrefix(l, prefix) {
			return nil, fmt.Errorf("child said %q, want %q…", l, prefix)
		}
		return strings.Fields(l)[1:], nil
	case <-time.After(LineTimeout):
		return nil, fmt.Errorf("child silent, waiting for %q", prefix)
	}
}

// Ask says line and expects an answer starting with prefix.
func (c *Child) Ask(line, prefix string) ([]string, error) {
	if err := c.Say(line); err != nil {
		return nil, err
	}
	f, err := c.Expect(prefix)
	if err != nil {
		return nil, fmt.Errorf("answer to %q: %w", line, err)
	}
	return f, nil
}

// Wait waits for the child to exit by itself, at most d; a child still
// running then is killed and Wait reports it.
func (c *Child) Wait(d time.Duration) error {
	select {
	case <-c.exited:
		return nil
	case <-time.After(d):
		_ = c.cmd.Process.Kill()
		return errors.New("child did not exit")
	}
}

// Kill ends the child with SIGKILL (waking it first, if it was stopped)
// and waits for it, at most d. Killing a child that already exited is not
// an error.
func (c *Child) Kill(d time.Duration) error {
	_ = c.cmd.Process.Signal(syscall.SIGCONT)
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-c.exited:
		return nil
	case <-time.After(d):
		return errors.New("killed child did not exit")
	}
}
