package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Child is a server an experiment runs in its own process through
// Options.Command (`rdmakit sock serve`, `rdmakit objstore serve`, …),
// which says it is ready with one line on stdout.
type Child struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed when it has exited
	stderr Tail
}

// StartChild runs args through env.Command and waits, at most startup,
// for the first line the process writes on stdout; accept parses it
// (an error means it is not the announcement expected). The rest of its
// stdout is dropped; the last of its stderr is kept for error messages.
// The process is killed when ctx ends, and by the kernel when the
// thread that started it exits (Linux), so a crashed benchmark leaves
// none behind; Stop ends it before. ErrNoCommand when env has no
// Command.
func StartChild(ctx context.Context, env *Env, startup time.Duration, accept func(line string) error, args ...string) (*Child, error) {
	if env.Command == nil {
		return nil, ErrNoCommand
	}
	c := &Child{done: make(chan struct{})}
	c.cmd = env.Command(ctx, args...)
	c.cmd.Stderr = &c.stderr
	c.cmd.SysProcAttr = childAttr()
	c.cmd.WaitDelay = time.Second
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", strings.Join(args, " "), err)
	}
	go func() {
		_ = c.cmd.Wait()
		close(c.done)
	}()
	announced := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		line, _ := r.ReadString('\n')
		announced <- line
		_, _ = r.WriteTo(io.Discard)
	}()
	t := time.NewTimer(startup)
	defer t.Stop()
	select {
	case line := <-announced:
		if err = accept(line); err == nil {
			return c, nil
		}
	case <-t.C:
		err = fmt.Errorf("it did not announce itself within %v", startup)
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.Stop()
	return nil, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, c.stderr.String())
}

// Pid is the process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// CPU is the process's user+system CPU time so far (ProcCPU).
func (c *Child) CPU() (time.Duration, error) { return ProcCPU(c.Pid()) }

// Stop ends the process with SIGINT (its graceful shutdown), kills it if
// it has not exited 5 s later, and waits for it.
func (c *Child) Stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// Exited reports whether the process has exited, with what it last wrote
// to stderr.
func (c *Child) Exited() (bool, string) {
	select {
	case <-c.done:
		return true, c.stderr.String()
	default:
		return false, ""
	}
}

// Explain adds what the process last wrote to stderr to err when it has
// exited (the likely cause of err); otherwise it returns err.
func (c *Child) Explain(err error) error {
	if gone, stderr := c.Exited(); gone {
		return fmt.Errorf("%w (%s exited: %s)", err, c.cmd.Args[0], stderr)
	}
	return err
}
