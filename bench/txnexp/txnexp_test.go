package txnexp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/txntest"
)

func quickEnv() *bench.Env {
	return &bench.Env{Options: bench.Options{Quick: true, Duration: 50 * time.Millisecond}, Log: slog.New(slog.DiscardHandler)}
}

// slowDB is a txn.DB whose commits wait a little first, so that
// concurrent transactions overlap.
type slowDB struct{ txn.DB }

func (d slowDB) Begin(ctx context.Context) (txn.Tx, error) {
	tx, err := d.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return slowTx{tx.(txntraced)}, nil
}

type txntraced interface {
	txn.Tx
	txn.Traced
}

type slowTx struct{ txntraced }

func (t slowTx) Commit() error {
	time.Sleep(100 * time.Microsecond)
	return t.txntraced.Commit()
}

// started counts the memSystems started.
var started atomic.Int32

// memSystem is an in-process system on a MemDB (opts), counting its
// stops in stopped.
func memSystem(name string, stopped *atomic.Int32, opts ...txntest.Option) system {
	return system{name: name, start: func(context.Context, *bench.Env, dbSize) (*deployment, error) {
		started.Add(1)
		db := slowDB{txntest.NewMemDB(opts...)}
		return &deployment{transport: "memory", pids: func() []int { return []int{os.Getpid()} }, db: db,
			stop: func() { db.Close(); stopped.Add(1) }}, nil
	}}
}

func col(t *testing.T, r *bench.Result, row []any, name string) any {
	t.Helper()
	i := r.Column(name)
	if i < 0 {
		t.Fatalf("no column %q", name)
	}
	return row[i]
}

// txn-ycsbt over two serializable in-memory systems: a row per system
// and skew, ratios against the one named FaRM, every point checked
// (the history grows), no round trips from clients that do not count
// them; a system that cannot run is left out with its reason.
func TestYCSBTRows(t *testing.T) {
	var stopped atomic.Int32
	absent := system{name: "absent", start: func(context.Context, *bench.Env, dbSize) (*deployment, error) {
		return nil, fmt.Errorf("%w: no such program", errUnavailable)
	}}
	r, err := runYCSBT(t.Context(), quickEnv(), []system{memSystem("FaRM", &stopped), absent, memSystem("PRISM-TX", &stopped)})
	if err != nil {
		t.Fatal(err)
	}
	if stopped.Load() != 2 {
		t.Errorf("%d systems stopped, want 2", stopped.Load())
	}
	if len(r.Rows) != 2*len(quickZipfs) {
		t.Fatalf("%d rows, want %d", len(r.Rows), 2*len(quickZipfs))
	}
	last := map[any]int{}
	for _, row := range r.Rows {
		sys := col(t, r, row, "system")
		if rate, ok := col(t, r, row, "rate").(float64); !ok || rate <= 0 {
			t.Errorf("%v: rate %v", row[:4], col(t, r, row, "rate"))
		}
		n, ok := col(t, r, row, "checked").(int)
		if !ok || n <= last[sys] || n < quickYCSBTKeys/24 {
			t.Errorf("%v: checked %v after %d", row[:4], col(t, r, row, "checked"), last[sys])
		}
		last[sys] = n
		if col(t, r, row, "trips") != nil {
			t.Errorf("%v: trips %v from a client that does not count them", row[:4], col(t, r, row, "trips"))
		}
		if sys == "FaRM" && col(t, r, row, "rate_vs_farm") != 1.0 {
			t.Errorf("%v: the reference's ratio is %v", row[:4], col(t, r, row, "rate_vs_farm"))
		}
	}
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "absent: no rows") || !strings.Contains(notes, "PRISM-TX against FaRM, same run: zipf 0.5") {
		t.Errorf("notes: %s", notes)
	}
}

// The negative control: a system that does not validate its reads
// (lost updates under YCSB-T's read-modify-writes at zipf 0.99) fails the
// run with the checker's error, and every system is stopped.
func TestYCSBTFailsUnserializable(t *testing.T) {
	var stopped atomic.Int32
	env := quickEnv()
	env.Duration = 300 * time.Millisecond
	_, err := runYCSBT(t.Context(), env, []system{memSystem("FaRM", &stopped), memSystem("broken", &stopped, txntest.Unvalidated())})
	if !errors.Is(err, check.ErrNotSerializable) || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("run: %v, want the checker's error on the unvalidated system", err)
	}
	if stopped.Load() != 2 {
		t.Errorf("%d systems stopped, want 2", stopped.Load())
	}
}

// A run whose context ends returns its error, no result, and stops its
// systems; so does a system that fails to start.
func TestCanceledAndBroken(t *testing.T) {
	var stopped atomic.Int32
	started.Store(0)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	r, err := runPeers(ctx, quickEnv(), []system{memSystem("FaRM", &stopped), memSystem("PRISM-TX", &stopped)})
	if !errors.Is(err, context.DeadlineExceeded) || r != nil {
		t.Errorf("run: %v, %v; want the context's error", r, err)
	}
	broken := errors.New("node crashed")
	_, err = runYCSBT(t.Context(), quickEnv(), []system{memSystem("FaRM", &stopped),
		{name: "broken", start: func(context.Context, *bench.Env, dbSize) (*deployment, error) { return nil, broken }}})
	if !errors.Is(err, broken) {
		t.Errorf("run: %v, want the broken system's error", err)
	}
	if stopped.Load() != started.Load() || stopped.Load() < 2 {
		t.Errorf("%d systems stopped, %d started", stopped.Load(), started.Load())
	}
}

// txn-peers with PostgreSQL (skipped when it is not installed) and an
// in-memory system: rows for both at every point, PostgreSQL's
// untraced, the money checked on both, the ratio note written, and no
// server process left behind.
func TestPeersQuick(t *testing.T) {
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/postgres"); err != nil {
		if _, err := exec.LookPath("postgres"); err != nil {
			t.Skip("PostgreSQL 15 is not installed (sudo scripts/install-peers.sh postgres)")
		}
	}
	var stopped atomic.Int32
	r, err := runPeers(t.Context(), quickEnv(), []system{peerSystems[0], memSystem("MemDB", &stopped)})
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * len(peerWorkloads) * len(peerClients); len(r.Rows) != want {
		t.Fatalf("%d rows, want %d: %q", len(r.Rows), want, r.Notes)
	}
	for _, row := range r.Rows {
		pg := col(t, r, row, "system") == pgName
		if rate, ok := col(t, r, row, "rate").(float64); !ok || rate <= 0 {
			t.Errorf("%v: rate %v", row[:4], col(t, r, row, "rate"))
		}
		if (col(t, r, row, "checked") == nil) != pg {
			t.Errorf("%v: checked %v", row[:4], col(t, r, row, "checked"))
		}
		if cpu, ok := col(t, r, row, "node_cpu").(float64); pg && (!ok || cpu < 0) {
			t.Errorf("%v: PostgreSQL's CPU %v", row[:4], col(t, r, row, "node_cpu"))
		}
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"held at the end on: PostgreSQL, MemDB over memory", "The better rdmakit protocol at 32 clients", "PostgreSQL 15"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q: %s", want, notes)
		}
	}
	if out, err := exec.Command("pgrep", "-P", fmt.Sprint(os.Getpid())).Output(); err == nil {
		t.Errorf("child processes left: %s", out)
	}
}

// --only keeps the systems it names, alone or with a transport, case
// aside, and refuses a run it would leave empty.
func TestOnly(t *testing.T) {
	env := quickEnv()
	env.Only = []string{"postgresql", "PRISM-TX/shm", "FORD"}
	got, err := keep(env, peerSystems)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.name+"/"+s.transport)
	}
	if want := "PostgreSQL/ FORD/tcp PRISM-TX/shm FORD/shm"; strings.Join(names, " ") != want {
		t.Fatalf("kept %q, want %q", strings.Join(names, " "), want)
	}
	env.Only = []string{"MySQL"}
	if _, err := keep(env, peerSystems); !errors.Is(err, errNoSystem) || !strings.Contains(err.Error(), "PRISM-TX/shm") {
		t.Fatalf("--only MySQL: %v, want errNoSystem listing the systems", err)
	}
	env.Only = nil
	if all, err := keep(env, peerSystems); err != nil || len(all) != len(peerSystems) {
		t.Fatalf("no --only: %d systems, %v", len(all), err)
	}
}
