package rsexp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/blockstore"
)

// col returns row's value in the named column.
func col(t *testing.T, r *bench.Result, row []any, name string) any {
	t.Helper()
	i := r.Column(name)
	if i < 0 {
		t.Fatalf("no column %q", name)
	}
	return row[i]
}

func float(t *testing.T, r *bench.Result, row []any, name string) float64 {
	t.Helper()
	v, ok := col(t, r, row, name).(float64)
	if !ok {
		t.Fatalf("%v: %s is %v, not a number", row[:5], name, col(t, r, row, name))
	}
	return v
}

// TestYCSBQuickEtcd runs rs-ycsb as `rdmakit bench run rs-ycsb --quick`
// does, with etcd (the rdmakit systems need the rdmakit command to start
// their replicas: they are left out here), and checks every point has its row and that the
// cluster is gone afterwards.
func TestYCSBQuickEtcd(t *testing.T) {
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("etcd is not installed (sudo scripts/install-peers.sh etcd)")
	}
	start := time.Now()
	r, _, err := bench.Run(t.Context(), "rs-ycsb", bench.Options{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("quick run: %v, %d rows", time.Since(start).Round(time.Millisecond), len(r.Rows))
	if want := len(ycsbWorkloads) * len(keyDists) * len(clientCounts); len(r.Rows) != want {
		t.Fatalf("%d rows, want %d (notes: %q)", len(r.Rows), want, r.Notes)
	}
	for _, row := range r.Rows {
		if col(t, r, row, "system") != "etcd" {
			continue
		}
		t.Logf("%v", row)
		rate, p50, p99 := float(t, r, row, "rate"), float(t, r, row, "p50"), float(t, r, row, "p99")
		if rate <= 0 || p50 <= 0 || p99 < p50 {
			t.Errorf("%v: rate %v, p50 %v, p99 %v", row[:5], rate, p50, p99)
		}
		// One gRPC request per operation, and no operation failed.
		if trips := float(t, r, row, "trips"); trips < 1 || trips > 1.001 {
			t.Errorf("%v: %v round trips per operation, want 1", row[:5], trips)
		}
		if v := float(t, r, row, "rate_vs_etcd"); v != 1 {
			t.Errorf("%v: etcd's rate is %v× its own", row[:5], v)
		}
		if cpu := float(t, r, row, "replica_cpu"); cpu < 0 {
			t.Errorf("%v: replica CPU %v", row[:5], cpu)
		}
		if float(t, r, row, "read_p50") <= 0 {
			t.Errorf("%v: no read median", row[:5])
		}
		if w := col(t, r, row, "write_p50"); (w == nil) != (col(t, r, row, "workload") == "C") {
			t.Errorf("%v: write median %v", row[:5], w)
		}
	}
	for _, n := range r.Notes {
		if strings.Contains(n, "no rows") && strings.Contains(n, bench.ErrNoCommand.Error()) {
			continue // the rdmakit systems run `rdmakit rs replica`: cmd/rdmakit's test runs them
		}
		if strings.Contains(n, "failed") || strings.Contains(n, "no rows") {
			t.Errorf("note: %s", n)
		}
	}
	assertClean(t)
}

// assertClean fails when an etcd member or a cluster directory of this
// process is left.
func assertClean(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("pgrep", "-P", strconv.Itoa(os.Getpid()), "-x", "etcd").Output(); err == nil {
		t.Errorf("etcd members left running: %s", strings.TrimSpace(string(out)))
	}
	left, _ := filepath.Glob(fmt.Sprintf("/dev/shm/rdmakit-etcd-%d-*", os.Getpid()))
	if len(left) > 0 {
		t.Errorf("cluster directories left: %v", left)
	}
}

// Without etcd the run still succeeds, without etcd's rows, and says
// why.
func TestYCSBSkipsMissingEtcd(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r, err := runYCSB(t.Context(), quickEnv(), systems)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 0 {
		t.Errorf("%d rows without etcd", len(r.Rows))
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "etcd: no rows") || !strings.Contains(strings.Join(r.Notes, "\n"), "install-peers.sh etcd") {
		t.Errorf("notes do not say why etcd has no rows: %q", r.Notes)
	}
}

func quickEnv() *bench.Env {
	return &bench.Env{Options: bench.Options{Quick: true, Duration: 20 * time.Millisecond}, Log: slog.New(slog.DiscardHandler)}
}

// memStore is a blockstore.Store in memory that waits delay per
// operation.
type memStore struct {
	mu    sync.Mutex
	l     blockstore.Layout
	m     map[uint64][]byte
	delay time.Duration
}

func (s *memStore) Read(ctx context.Context, id uint64, dst []byte) ([]byte, error) {
	if err := s.l.CheckOp(id, -1); err != nil {
		return dst, err
	}
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[id]; ok {
		return append(dst, v...), nil
	}
	return append(dst, make([]byte, s.l.BlockSize)...), nil
}

func (s *memStore) Write(ctx context.Context, id uint64, data []byte) error {
	if err := s.l.CheckOp(id, len(data)); err != nil {
		return err
	}
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = append([]byte(nil), data...)
	return nil
}

func (s *memStore) wait() {
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
}

func (s *memStore) Layout() blockstore.Layout { return s.l }
func (s *memStore) Close() error              { return nil }

// countingStore is a client of a memStore that counts its own round
// trips: one per operation.
type countingStore struct {
	*memStore
	n atomic.Uint64
}

func (c *countingStore) Read(ctx context.Context, id uint64, dst []byte) ([]byte, error) {
	c.n.Add(1)
	return c.memStore.Read(ctx, id, dst)
}

func (c *countingStore) Write(ctx context.Context, id uint64, data []byte) error {
	c.n.Add(1)
	return c.memStore.Write(ctx, id, data)
}

func (c *countingStore) RoundTrips() uint64 { return c.n.Load() }

// memSystem is an in-process system whose clients share one memStore.
func memSystem(name string, delay time.Duration, counting bool, stopped *atomic.Int32) system {
	return system{name: name, start: func(_ context.Context, _ *bench.Env, v volume) (*deployment, error) {
		s := &memStore{l: blockstore.Layout{BlockSize: v.blockSize, Blocks: v.blocks, Replicas: []string{"mem"}}, m: map[uint64][]byte{}, delay: delay}
		return &deployment{transport: "memory", pids: []int{os.Getpid()},
			open: func(context.Context) (blockstore.Store, error) {
				if counting {
					return &countingStore{memStore: s}, nil
				}
				return s, nil
			},
			stop: func() { stopped.Add(1) }}, nil
	}}
}

// The ratio columns divide by etcd's row of the same point; a client
// without RoundTrips leaves trips empty; a system that cannot run is
// left out with its reason.
func TestYCSBRatios(t *testing.T) {
	var stopped atomic.Int32
	unavailable := system{name: "absent", start: func(context.Context, *bench.Env, volume) (*deployment, error) {
		return nil, fmt.Errorf("%w: no such program", errUnavailable)
	}}
	r, err := runYCSB(t.Context(), quickEnv(), []system{
		memSystem("etcd", 2*time.Millisecond, true, &stopped), // the reference, slow: 32 clients at most 16k ops/s, far below the fast store even on a loaded machine
		memSystem("fast", 0, false, &stopped),
		unavailable,
		memSystem("slow", 2*time.Millisecond, true, &stopped),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := stopped.Load(); got != 3 {
		t.Errorf("%d systems stopped, want 3", got)
	}
	if want := 3 * len(ycsbWorkloads) * len(keyDists) * len(clientCounts); len(r.Rows) != want {
		t.Fatalf("%d rows, want %d", len(r.Rows), want)
	}
	for _, row := range r.Rows {
		switch col(t, r, row, "system") {
		case "etcd":
			if float(t, r, row, "rate_vs_etcd") != 1 || float(t, r, row, "p50_vs_etcd") != 1 || float(t, r, row, "trips") != 1 {
				t.Errorf("reference row %v", row)
			}
		case "slow":
		case "fast":
			if v := float(t, r, row, "rate_vs_etcd"); v <= 1 {
				t.Errorf("%v: the store without delay runs %v× the one with", row[:5], v)
			}
			if v := float(t, r, row, "p50_vs_etcd"); v >= 1 {
				t.Errorf("%v: p50 %v× the delayed store's", row[:5], v)
			}
			if col(t, r, row, "trips") != nil {
				t.Errorf("%v: trips %v from a client that does not count them", row[:5], col(t, r, row, "trips"))
			}
		default:
			t.Errorf("row of %v", col(t, r, row, "system"))
		}
	}
	// fast against slow, not against etcd: one note, every workload and
	// key distribution at 32 clients, write medians only where there
	// are writes.
	var vs []string
	for _, n := range r.Notes {
		if strings.Contains(n, " against ") {
			vs = append(vs, n)
		}
	}
	if len(vs) != 1 || !strings.HasPrefix(vs[0], "fast against slow at 32 clients") ||
		strings.Count(vs[0], "YCSB-") != len(ycsbWorkloads)*len(keyDists) || strings.Count(vs[0], "write p50 n/a") != len(keyDists) {
		t.Errorf("comparison notes: %q", vs)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "absent: no rows") {
		t.Errorf("notes do not say why absent has no rows: %q", r.Notes)
	}
	if len(r.Plots) != len(ycsbWorkloads) {
		t.Errorf("%d plots", len(r.Plots))
	}
}

// A system that fails to start ends the run with its error, and the
// systems started before it are stopped.
func TestYCSBFailureStopsSystems(t *testing.T) {
	var stopped atomic.Int32
	broken := errors.New("replica crashed")
	_, err := runYCSB(t.Context(), quickEnv(), []system{
		memSystem("etcd", 0, true, &stopped),
		{name: "broken", start: func(context.Context, *bench.Env, volume) (*deployment, error) { return nil, broken }},
	})
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "broken") {
		t.Errorf("run: %v, want the broken system's error", err)
	}
	if stopped.Load() != 1 {
		t.Errorf("%d systems stopped, want 1", stopped.Load())
	}
}

// A run whose context ends stops with that error, not with rows of the
// points it cut short, and stops its systems.
func TestYCSBCanceled(t *testing.T) {
	var stopped atomic.Int32
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	r, err := runYCSB(ctx, quickEnv(), []system{memSystem("etcd", 0, true, &stopped), memSystem("other", 0, true, &stopped)})
	if !errors.Is(err, context.DeadlineExceeded) || r != nil {
		t.Errorf("run: %v, %v; want the context's error", r, err)
	}
	if stopped.Load() != 2 {
		t.Errorf("%d systems stopped, want 2", stopped.Load())
	}
}
