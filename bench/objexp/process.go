package objexp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/objstore/node"
)

// store is `rdmakit objstore serve` in its own process.
type store struct {
	node.Announcement
	cmd    *exec.Cmd
	done   chan struct{} // closed when it has exited
	stderr *bench.Tail
}

// storeStartup bounds how long a store takes to announce itself.
const storeStartup = 30 * time.Second

// startStore runs `rdmakit objstore serve ARGS…` through env.Command and
// waits for its announcement. It is killed when ctx ends; stop ends it
// before. bench.ErrNoCommand when env has no Command.
func startStore(ctx context.Context, env *bench.Env, args ...string) (*store, error) {
	if env.Command == nil {
		return nil, bench.ErrNoCommand
	}
	args = append([]string{"objstore", "serve"}, args...)
	s := &store{done: make(chan struct{}), stderr: &bench.Tail{}}
	s.cmd = env.Command(ctx, args...)
	s.cmd.Stderr = s.stderr
	s.cmd.SysProcAttr = childAttr()
	s.cmd.WaitDelay = time.Second
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("objexp: start %s: %w", strings.Join(args, " "), err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	announced := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		line, _ := r.ReadString('\n')
		announced <- line
		_, _ = r.WriteTo(discard{})
	}()
	t := time.NewTimer(storeStartup)
	defer t.Stop()
	select {
	case line := <-announced:
		a, perr := node.ParseAnnouncement(line)
		if perr == nil {
			s.Announcement = a
			return s, nil
		}
		err = perr
	case <-t.C:
		err = fmt.Errorf("it did not announce itself within %v", storeStartup)
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.stop()
	return nil, fmt.Errorf("objexp: %s: %w: %s", strings.Join(args, " "), err, s.stderr.String())
}

// pid is the store's process id.
func (s *store) pid() int { return s.cmd.Process.Pid }

// stop ends the store with SIGINT, kills it if it has not exited 5 s
// later, and waits for it.
func (s *store) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// explain adds the store's last words to err if it has exited.
func (s *store) explain(err error) error {
	select {
	case <-s.done:
		return fmt.Errorf("%w (the store exited: %s)", err, s.stderr.String())
	default:
		return err
	}
}

// cpu is the store process's CPU time so far.
func (s *store) cpu() (time.Duration, error) { return bench.ProcCPU(s.pid()) }

// discard drops what is written to it.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// errNoCommandNote is the note of an experiment run without a way to
// start stores.
func errNoCommandNote(err error) string {
	if errors.Is(err, bench.ErrNoCommand) {
		return fmt.Sprintf("no store rows: %v.", err)
	}
	return err.Error()
}
