package bench

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// shEnv runs each Child as `sh -c SCRIPT`, the script being the last
// argument.
func shEnv() *Env {
	return &Env{Options: Options{Command: func(ctx context.Context, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, "sh", "-c", args[len(args)-1])
	}}}
}

// TestStartChild: a child that announces itself is running until Stop;
// one that says something else, says nothing in time, or dies is an
// error carrying its stderr; no Command is ErrNoCommand.
func TestStartChild(t *testing.T) {
	ctx := context.Background()
	want := func(line string) error {
		if strings.TrimSpace(line) != "ready" {
			return errors.New("not ready")
		}
		return nil
	}
	c, err := StartChild(ctx, shEnv(), 5*time.Second, want, "echo ready; exec sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	if gone, _ := c.Exited(); gone {
		t.Fatal("the child exited after announcing itself")
	}
	if err := c.Explain(errors.New("x")); err.Error() != "x" {
		t.Fatalf("Explain of a running child: %v", err)
	}
	c.Stop()
	if gone, _ := c.Exited(); !gone {
		t.Fatal("the child runs after Stop")
	}

	for script, inErr := range map[string]string{
		"echo broken >&2; echo hello":    "not ready",
		"echo broken >&2; exit 3":        "not ready", // EOF: an empty line
		"echo broken >&2; exec sleep 60": "did not announce itself",
	} {
		_, err := StartChild(ctx, shEnv(), 300*time.Millisecond, want, script)
		if err == nil || !strings.Contains(err.Error(), inErr) || !strings.Contains(err.Error(), "broken") {
			t.Errorf("%q: %v, want an error with %q and its stderr", script, err, inErr)
		}
	}
	// A child that dies after announcing: Explain tells its last words.
	c, err = StartChild(ctx, shEnv(), 5*time.Second, want, "echo ready; sleep 0.1; echo dying words >&2; exit 1")
	if err != nil {
		t.Fatal(err)
	}
	for gone := false; !gone; gone, _ = c.Exited() {
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Explain(errors.New("x")); !strings.Contains(err.Error(), "dying words") {
		t.Fatalf("Explain of an exited child: %v", err)
	}
	// The caller gives up while the child says nothing: the context's
	// error, and the child is gone.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := StartChild(cctx, shEnv(), 5*time.Second, want, "exec sleep 60"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while waiting: %v, want context.Canceled", err)
	}
	if _, err := StartChild(ctx, &Env{}, time.Second, want, "x"); !errors.Is(err, ErrNoCommand) {
		t.Errorf("no Command: %v", err)
	}
}
