package sockexp

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/bench"
)

// childArgs carries a server's arguments to this test binary run as
// `rdmakit sock serve` (see TestMain), one per line.
const childArgs = "SOCKEXP_TEST_SERVE"

// TestMain lets the tests run this test binary as `rdmakit sock serve`:
// the experiments' servers in their own processes.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childArgs); ok {
		os.Exit(serveChild(strings.Split(args, "\n")))
	}
	os.Exit(m.Run())
}

// serveChild is `rdmakit sock serve --listen URI --app APP` in this
// process, until SIGINT or SIGTERM.
func serveChild(args []string) int {
	if len(args) < 2 || args[0] != "sock" || args[1] != "serve" {
		fmt.Fprintf(os.Stderr, "not a sock serve command: %q\n", args)
		return 2
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	uri := fs.String("listen", "", "")
	app := fs.String("app", "", "")
	if err := fs.Parse(args[2:]); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := ServeURI(ctx, os.Stdout, *uri, App(*app)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// selfCommand is bench.Options.Command for the tests: this test binary
// as the rdmakit command (only `sock serve` is understood).
func selfCommand(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgs+"="+strings.Join(args, "\n"))
	return cmd
}

// quickEnv is a quick run whose servers are this test binary.
func quickEnv() *bench.Env {
	return &bench.Env{Options: bench.Options{Quick: true, Command: selfCommand}, Log: slog.New(slog.DiscardHandler)}
}

// col returns a row's value in the named column.
func col(t *testing.T, r *bench.Result, row []any, name string) any {
	t.Helper()
	i := r.Column(name)
	if i < 0 {
		t.Fatalf("no column %q", name)
	}
	return row[i]
}

// positive fails the test unless the row's column holds a float64 > 0.
func positive(t *testing.T, r *bench.Result, row []any, names ...string) {
	t.Helper()
	for _, name := range names {
		if v, ok := col(t, r, row, name).(float64); !ok || !(v > 0) {
			t.Errorf("%v: %s = %v, want > 0", row[:3], name, col(t, r, row, name))
		}
	}
}

// noChildren fails the test if this process has child processes left.
func noChildren(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		out, err := exec.Command("pgrep", "-P", fmt.Sprint(os.Getpid())).Output()
		if err != nil || len(strings.TrimSpace(string(out))) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("child processes left: %s", out)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
