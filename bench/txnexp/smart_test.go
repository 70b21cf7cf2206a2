package txnexp

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/txn/txntest"
)

// memSmartTarget is a txn-smart target on one MemDB (opts): each point's
// client is the same database, counting two commit round trips per
// commit (three at most) and reporting, for the smart series, one worker
// with retry rate 0.25, n_max the point's tasks and limit 8. It counts
// the clients opened and closed and its own stop.
func memSmartTarget(opened, closed, stopped *atomic.Int32, opts ...txntest.Option) smartTargetFunc {
	return func(context.Context, *bench.Env, dbSize) (*smartTarget, error) {
		db := slowDB{txntest.NewMemDB(opts...)}
		open := func(_ context.Context, v smartVariant, workers, tasks int) (*smartClient, error) {
			opened.Add(1)
			var n atomic.Uint64
			d := &deployment{transport: "memory", pids: func() []int { return []int{os.Getpid()} }, db: countingDB{db, &n},
				commitTrips: func() (uint64, uint64, uint64) { c := n.Load(); return 2 * c, c, 3 },
				stop:        func() { closed.Add(1) }}
			c := &smartClient{dep: d}
			if v.smart != nil {
				c.stats = func() []smart.Stats { return []smart.Stats{{RetryRate: 0.25, Tasks: tasks, Limit: 8}} }
			}
			return c, nil
		}
		return &smartTarget{transport: "memory", pids: func() []int { return []int{os.Getpid()} }, loader: db, open: open,
			stop: func() { db.Close(); stopped.Add(1) }}, nil
	}
}

// txn-smart on an in-memory target: a row per series, workload and task
// count, each with a rate, a checked history that grows, FORD's ratios 1,
// the smart series' runtime figures (limit only with throttling), none
// for plain FORD; the notes compare Smart-DTX with FORD at the most tasks
// and give FORD's commit round trips; every client is closed and the
// target stopped.
func TestSmartRows(t *testing.T) {
	var opened, closed, stopped atomic.Int32
	r, err := runSmart(t.Context(), quickEnv(), []smartTargetFunc{memSmartTarget(&opened, &closed, &stopped)})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(smartWorkloads) * len(quickSmartTasks) * len(smartVariants); len(r.Rows) != want || int(opened.Load()) != want {
		t.Fatalf("%d rows, %d clients, want %d", len(r.Rows), opened.Load(), want)
	}
	if closed.Load() != opened.Load() || stopped.Load() != 1 {
		t.Errorf("%d clients closed of %d, target stopped %d times", closed.Load(), opened.Load(), stopped.Load())
	}
	last := map[any]int{}
	for _, row := range r.Rows {
		sys, wl := col(t, r, row, "system"), col(t, r, row, "workload")
		if rate, ok := col(t, r, row, "rate").(float64); !ok || rate <= 0 {
			t.Errorf("%v: rate %v", row[:6], col(t, r, row, "rate"))
		}
		if n, ok := col(t, r, row, "checked").(int); !ok || n <= 0 || n < last[wl] {
			t.Errorf("%v: checked %v after %d", row[:6], col(t, r, row, "checked"), last[wl])
		} else {
			last[wl] = n
		}
		if ct := col(t, r, row, "commit_trips"); wl == "SmallBank" && ct != 2.0 {
			t.Errorf("%v: commit_trips %v, want 2", row[:6], ct)
		}
		tasks := col(t, r, row, "tasks").(int)
		if col(t, r, row, "clients") != smartWorkers*tasks {
			t.Errorf("%v: clients %v", row[:6], col(t, r, row, "clients"))
		}
		rr, nmax, limit := col(t, r, row, "retry_rate"), col(t, r, row, "n_max"), col(t, r, row, "limit")
		switch sys {
		case fordName:
			if col(t, r, row, "rate_vs_ford") != 1.0 || col(t, r, row, "p50_vs_ford") != 1.0 || rr != nil || nmax != nil || limit != nil {
				t.Errorf("FORD's row: %v", row)
			}
		case smartDTXName, "throttling":
			if rr != 0.25 || nmax != float64(tasks) || limit != 8.0 {
				t.Errorf("%v: retry rate %v, n_max %v, limit %v", row[:6], rr, nmax, limit)
			}
		default:
			if rr != 0.25 || nmax != float64(tasks) || limit != nil {
				t.Errorf("%v: retry rate %v, n_max %v, limit %v (no throttling)", row[:6], rr, nmax, limit)
			}
		}
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"Smart-DTX against FORD over memory at 8 tasks per worker (16 client goroutines), same run: SmallBank: rate ",
		"p50 ", "TATP: rate ", "FORD's read-write SmallBank commits took 2.00 round trips on average", "money", "held at the end over: memory", "Serializable over memory, the whole history after the last point: "} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q: %s", want, notes)
		}
	}
}

// A target that does not validate its reads fails txn-smart with the
// checker's error and is stopped; one that fails to start fails the run.
func TestSmartFailsUnserializable(t *testing.T) {
	var opened, closed, stopped atomic.Int32
	env := quickEnv()
	_, err := runSmart(t.Context(), env, []smartTargetFunc{memSmartTarget(&opened, &closed, &stopped, txntest.Unvalidated())})
	if !errors.Is(err, check.ErrNotSerializable) {
		t.Fatalf("run: %v, want the checker's error", err)
	}
	if stopped.Load() != 1 || closed.Load() != opened.Load() {
		t.Errorf("target stopped %d times, %d clients closed of %d", stopped.Load(), closed.Load(), opened.Load())
	}
	broken := errors.New("node crashed")
	if _, err := runSmart(t.Context(), env, []smartTargetFunc{func(context.Context, *bench.Env, dbSize) (*smartTarget, error) { return nil, broken }}); !errors.Is(err, broken) {
		t.Errorf("run: %v, want the target's error", err)
	}
}

// TestSmartOnly: --only keeps the series named (FORD and Smart-DTX
// here): only their clients are opened and only their rows made.
func TestSmartOnly(t *testing.T) {
	var opened, closed, stopped atomic.Int32
	env := quickEnv()
	env.Only = []string{"FORD", "smart-dtx/memory"}
	r, err := runSmart(t.Context(), env, []smartTargetFunc{memSmartTarget(&opened, &closed, &stopped)})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(smartWorkloads) * len(quickSmartTasks) * 2; len(r.Rows) != want || int(opened.Load()) != want {
		t.Fatalf("%d rows, %d clients, want %d", len(r.Rows), opened.Load(), want)
	}
	for _, row := range r.Rows {
		if sys := col(t, r, row, "system"); sys != fordName && sys != smartDTXName {
			t.Errorf("a row of %v, not selected", sys)
		}
	}
}
