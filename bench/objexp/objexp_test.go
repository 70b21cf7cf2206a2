package objexp

import (
	"context"
	"errors"
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
	"github.com/rdmakit/rdmakit/objstore/node"
)

// childArgs carries a store's arguments to this test binary run as
// `rdmakit objstore serve` (see TestMain), one per line.
const childArgs = "OBJEXP_TEST_SERVE"

// TestMain lets the tests run this test binary as `rdmakit objstore
// serve`: the experiments' stores in their own processes.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childArgs); ok {
		os.Exit(serveChild(strings.Split(args, "\n")))
	}
	os.Exit(m.Run())
}

// serveChild is `rdmakit objstore serve FLAGS` in this process, until
// SIGINT or SIGTERM. Sizes are plain byte counts or end in MiB or GiB.
func serveChild(args []string) int {
	if len(args) >= 2 && args[0] == "objstore" && args[1] == "tune" {
		return tuneChild(args[2:])
	}
	if len(args) < 2 || args[0] != "objstore" || args[1] != "serve" {
		fmt.Fprintf(os.Stderr, "not an objstore serve command: %q\n", args)
		return 2
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	mem := fs.String("mem", "64MiB", "")
	socket := fs.String("socket", "", "")
	listen := fs.String("listen", "", "")
	tcpListen := fs.String("tcp-listen", "", "")
	peers := fs.String("peers", "", "")
	protocol := fs.String("protocol", "hybrid", "")
	threshold := fs.Int("threshold", 0, "")
	stats := fs.String("stats", "", "")
	device := fs.String("device", "", "")
	register := fs.String("register", "", "")
	keep := fs.String("keep-resident", "0", "")
	if err := fs.Parse(args[2:]); err != nil {
		return 2
	}
	cfg := node.Config{Mem: parseSize(*mem), Socket: *socket, Stats: *stats, KeepResident: parseSize(*keep),
		Transfer: node.Transfer{Listen: *listen, Device: *device, TCPListen: *tcpListen, Protocol: *protocol, Threshold: *threshold, Register: *register}}
	if *peers != "" {
		cfg.Transfer.Peers = strings.Split(*peers, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := node.Serve(ctx, os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// tuneChild is `rdmakit objstore tune FLAGS` in this process: the
// threshold line the experiment parses (sizes given as byte counts or
// with KiB / MiB).
func tuneChild(args []string) int {
	fs := flag.NewFlagSet("tune", flag.ContinueOnError)
	peer := fs.String("peer", "", "")
	peerSocket := fs.String("peer-socket", "", "")
	device := fs.String("device", "", "")
	sizes := fs.String("sizes", "", "")
	runs := fs.Int("runs", 3, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := node.TuneConfig{Peer: *peer, PeerSocket: *peerSocket, Device: *device, Runs: *runs}
	for _, f := range strings.Split(*sizes, ",") {
		if f != "" {
			cfg.Sizes = append(cfg.Sizes, int(parseSize(f)))
		}
	}
	res, err := node.Tune(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("threshold: %d (pass --threshold %d to objstore serve)\n", res.Threshold, res.Threshold)
	return 0
}

// parseSize reads "512MiB", "1GiB", "4KiB" or a byte count.
func parseSize(s string) int64 {
	var n int64
	switch {
	case strings.HasSuffix(s, "GiB"):
		fmt.Sscan(strings.TrimSuffix(s, "GiB"), &n)
		return n << 30
	case strings.HasSuffix(s, "MiB"):
		fmt.Sscan(strings.TrimSuffix(s, "MiB"), &n)
		return n << 20
	case strings.HasSuffix(s, "KiB"):
		fmt.Sscan(strings.TrimSuffix(s, "KiB"), &n)
		return n << 10
	}
	fmt.Sscan(s, &n)
	return n
}

// selfCommand is bench.Options.Command for the tests: this test binary
// as the rdmakit command (only `objstore serve` and `objstore tune` are
// understood).
func selfCommand(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgs+"="+strings.Join(args, "\n"))
	return cmd
}

// quickEnv is a quick run whose stores are this test binary.
func quickEnv() *bench.Env {
	return &bench.Env{Options: bench.Options{Quick: true, Command: selfCommand}, Log: slog.New(slog.DiscardHandler)}
}

// cell returns a row's value in the named column.
func cell(t *testing.T, r *bench.Result, row []any, name string) any {
	t.Helper()
	i := r.Column(name)
	if i < 0 {
		t.Fatalf("no column %q", name)
	}
	return row[i]
}

// positive fails the test unless the row's columns hold float64s > 0.
func positive(t *testing.T, r *bench.Result, row []any, names ...string) {
	t.Helper()
	for _, name := range names {
		if v, ok := cell(t, r, row, name).(float64); !ok || !(v > 0) {
			t.Fatalf("row %v: %s = %v, want a positive number", row, name, cell(t, r, row, name))
		}
	}
}

func TestLocalQuick(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := runLocal(ctx, quickEnv())
	if err != nil {
		t.Fatal(err)
	}
	if want := len(localOps) * len(localSizes); len(r.Rows) != want {
		t.Fatalf("%d rows, want %d", len(r.Rows), want)
	}
	for _, row := range r.Rows {
		positive(t, r, row, "p50", "p99", "mean")
		if n := cell(t, r, row, "count").(int); n < minOps {
			t.Fatalf("row %v: %d operations, want at least %d", row, n, minOps)
		}
	}
	if !strings.Contains(strings.Join(r.Notes, " "), "get(64 MiB)/get(1 KiB)") {
		t.Fatalf("no ratio note: %q", r.Notes)
	}
}

func TestNoCommand(t *testing.T) {
	env := &bench.Env{Options: bench.Options{Quick: true}, Log: slog.New(slog.DiscardHandler)}
	r, err := runLocal(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 0 || len(r.Notes) == 0 {
		t.Fatalf("without a command: %d rows, notes %q; want none and a note", len(r.Rows), r.Notes)
	}
}

func TestFetchRedisQuick(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := quickEnv()
	env.Only = []string{"redis"}
	r, err := runFetch(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) == 0 {
		t.Skipf("no Redis rows: %q", r.Notes)
	}
	if len(r.Rows) != len(quickFetchSizes) {
		t.Fatalf("%d rows, want one per size (%d)", len(r.Rows), len(quickFetchSizes))
	}
	for _, row := range r.Rows {
		positive(t, r, row, "mean", "p50", "GB/s")
		if cell(t, r, row, "copied") != nil {
			t.Fatalf("row %v: Redis has no copy counter, want —", row)
		}
	}
}

// TestFetchQuick runs objstore-fetch quickly with every system, the
// verbs protocols over tcp and over shm: a row per system and size with
// latencies and throughput, copies where the protocol copies (SEND/RECV:
// both sides, 2× the size) and none where it does not (READ, the TCP
// paths), and the ratio notes of both transports.
func TestFetchQuick(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := runFetch(ctx, quickEnv())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, row := range r.Rows {
		sys, size := cell(t, r, row, "system").(string), cell(t, r, row, "size").(int)
		seen[sys]++
		positive(t, r, row, "mean", "p50", "GB/s")
		copied, _ := cell(t, r, row, "copied").(float64)
		proto, _, _ := strings.Cut(sys, "/")
		switch proto {
		case sysSendRecv:
			if copied != float64(2*size) {
				t.Errorf("sendrecv %d B: %v bytes copied per object, want %d", size, copied, 2*size)
			}
		case sysRead, sysTCP4K, sysTCPBulk:
			if copied != 0 {
				t.Errorf("%s %d B: %v bytes copied per object, want 0", sys, size, copied)
			}
		}
	}
	for _, sys := range fetchSystems {
		if seen[sys.name()] != len(quickFetchSizes) {
			t.Errorf("%s: %d rows, want %d", sys.name(), seen[sys.name()], len(quickFetchSizes))
		}
	}
	notes := strings.Join(r.Notes, " ")
	for _, want := range []string{"hybrid/tcp ÷ tcp4k GB/s at 4 MiB", "hybrid/shm ÷ tcp4k GB/s at 4 MiB", "sendrecv/shm ÷ hybrid/shm p50 at 1 KiB"} {
		if !strings.Contains(notes, want) {
			t.Fatalf("no ratio note %q: %q", want, r.Notes)
		}
	}
}

// TestFetchOnlyTransport: --only selects rows by name, by protocol
// (every transport) or by transport (every verbs protocol over it).
func TestFetchOnlyTransport(t *testing.T) {
	for _, c := range []struct {
		only []string
		want []string
	}{
		{[]string{"hybrid/shm"}, []string{"hybrid/shm"}},
		{[]string{"hybrid"}, []string{"hybrid/tcp", "hybrid/shm"}},
		{[]string{"shm", "tcp4k"}, []string{"tcp4k", "sendrecv/shm", "read/shm", "hybrid/shm"}},
	} {
		env := quickEnv()
		env.Only = c.only
		var got []string
		for _, s := range fetchSystems {
			if keeps(env, s) {
				got = append(got, s.name())
			}
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("--only %v: %v, want %v", c.only, got, c.want)
		}
	}
}

func TestFetchOnlyUnknown(t *testing.T) {
	env := quickEnv()
	env.Only = []string{"memcached"}
	if _, err := runFetch(context.Background(), env); !errors.Is(err, bench.ErrNoSystem) || !strings.Contains(err.Error(), "hybrid") {
		t.Fatalf("--only memcached: %v, want ErrNoSystem listing the systems", err)
	}
}
