package txnexp

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"weak"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/txntest"
)

// aloneGuard counts the systems started and not stopped, and records
// the moments (the first maxFaults) a system starts, or runs a
// transaction or a point, while another is up.
type aloneGuard struct {
	mu     sync.Mutex
	live   []string
	starts int
	faults []string
}

func (g *aloneGuard) started(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.live) > 0 {
		g.faults = append(g.faults, fmt.Sprintf("%s started while %v up", name, g.live))
	}
	g.live = append(g.live, name)
	g.starts++
}

func (g *aloneGuard) stopped(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, n := range g.live {
		if n == name {
			g.live = append(g.live[:i], g.live[i+1:]...)
			return
		}
	}
	g.faults = append(g.faults, name+" stopped but not up")
}

// maxFaults bounds the faults a guard keeps: a run that breaks the rule
// breaks it at every transaction.
const maxFaults = 10

func (g *aloneGuard) running(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if (len(g.live) != 1 || g.live[0] != name) && len(g.faults) < maxFaults {
		g.faults = append(g.faults, fmt.Sprintf("%s ran with %v up", name, g.live))
	}
}

// check fails t on every fault, on a system left up, and unless want
// systems started.
func (g *aloneGuard) check(t *testing.T, want int) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.faults) > 0 {
		t.Errorf("not one system at a time:\n%s", strings.Join(g.faults, "\n"))
	}
	if len(g.live) > 0 || g.starts != want {
		t.Errorf("%d systems started, want %d; %v left up", g.starts, want, g.live)
	}
}

// guardedDB reports each transaction it begins to its guard.
type guardedDB struct {
	txn.DB
	g    *aloneGuard
	name string
}

func (d guardedDB) Begin(ctx context.Context) (txn.Tx, error) {
	d.g.running(d.name)
	return d.DB.Begin(ctx)
}

// system is an in-memory system reported to g; before, when not nil,
// runs first at its start.
func (g *aloneGuard) system(name string, before func()) system {
	return system{name: name, start: func(context.Context, *bench.Env, dbSize) (*deployment, error) {
		if before != nil {
			before()
		}
		g.started(name)
		db := guardedDB{slowDB{txntest.NewMemDB()}, g, name}
		return &deployment{transport: "memory", pids: func() []int { return []int{os.Getpid()} }, db: db,
			stop: func() { db.Close(); g.stopped(name) }}, nil
	}}
}

// txn-peers measures its systems one at a time: none starts, and none
// runs a transaction, while another is up; when one starts, the last
// one's workloads are gone from the run and its histories unreachable
// (collected); every row is there, in the table's order.
func TestPeersAlone(t *testing.T) {
	g := &aloneGuard{}
	u := newPeerRun(quickEnv())
	var mu sync.Mutex
	var hists []weak.Pointer[check.History]
	var faults []string
	released := func() {
		mu.Lock()
		defer mu.Unlock()
		if len(u.loaded) != 0 {
			faults = append(faults, fmt.Sprintf("a system starts with %d others' workloads loaded", len(u.loaded)))
		}
		runtime.GC()
		for i, h := range hists {
			if h.Value() != nil {
				faults = append(faults, fmt.Sprintf("history %d still reachable when the next system starts", i))
			}
		}
	}
	// held notes the histories of the system that stops.
	held := func(s system) system {
		start := s.start
		s.start = func(ctx context.Context, env *bench.Env, size dbSize) (*deployment, error) {
			d, err := start(ctx, env, size)
			if err != nil {
				return nil, err
			}
			stop := d.stop
			d.stop = func() {
				mu.Lock()
				for _, m := range u.loaded {
					for _, l := range m {
						hists = append(hists, weak.Make(l.hist))
					}
				}
				mu.Unlock()
				stop()
			}
			return d, nil
		}
		return s
	}
	names := []string{"FaRM", "PRISM-TX", fordName}
	var systems []system
	for _, n := range names {
		systems = append(systems, held(g.system(n, released)))
	}
	r, err := u.run(t.Context(), quickEnv(), systems)
	if err != nil {
		t.Fatal(err)
	}
	released()
	g.check(t, len(names))
	if len(hists) != len(names)*len(peerWorkloads) {
		t.Errorf("%d histories seen at the systems' stops, want %d", len(hists), len(names)*len(peerWorkloads))
	}
	if len(faults) > 0 {
		t.Errorf("histories kept:\n%s", strings.Join(faults, "\n"))
	}
	if want := len(names) * len(peerWorkloads) * len(peerClients); len(r.Rows) != want {
		t.Fatalf("%d rows, want %d", len(r.Rows), want)
	}
	for i, row := range r.Rows {
		if got, want := col(t, r, row, "system"), names[i%len(names)]; got != want {
			t.Errorf("row %d: %v, want %s (the rows' order)", i, got, want)
		}
		if n, ok := col(t, r, row, "checked").(int); !ok || n <= 0 {
			t.Errorf("%v: checked %v", row[:4], col(t, r, row, "checked"))
		}
	}
	if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, "each system measured alone: its servers started before its points and stopped after; no other system's processes running") ||
		!strings.Contains(notes, "held at the end on: FaRM over memory, PRISM-TX over memory, FORD over memory") {
		t.Errorf("notes: %s", notes)
	}
}

// So does txn-ycsbt, a system that cannot run left out between them.
func TestYCSBTAlone(t *testing.T) {
	g := &aloneGuard{}
	absent := system{name: "absent", start: func(context.Context, *bench.Env, dbSize) (*deployment, error) {
		return nil, fmt.Errorf("%w: no such program", errUnavailable)
	}}
	r, err := runYCSBT(t.Context(), quickEnv(), []system{g.system("FaRM", nil), absent, g.system("PRISM-TX", nil), g.system(fordName, nil)})
	if err != nil {
		t.Fatal(err)
	}
	g.check(t, 3)
	if len(r.Rows) != 3*len(quickZipfs) {
		t.Errorf("%d rows, want %d", len(r.Rows), 3*len(quickZipfs))
	}
}

// And txn-smart its transports' targets: a target's points run while
// it alone is up.
func TestSmartAlone(t *testing.T) {
	g := &aloneGuard{}
	var opened, closed, stopped atomic.Int32
	guarded := func(name string) smartTargetFunc {
		inner := memSmartTarget(&opened, &closed, &stopped)
		return func(ctx context.Context, env *bench.Env, size dbSize) (*smartTarget, error) {
			tg, err := inner(ctx, env, size)
			if err != nil {
				return nil, err
			}
			g.started(name)
			tg.transport = name
			open, stop := tg.open, tg.stop
			tg.open = func(ctx context.Context, v smartVariant, workers, tasks int) (*smartClient, error) {
				g.running(name)
				return open(ctx, v, workers, tasks)
			}
			tg.stop = func() { stop(); g.stopped(name) }
			return tg, nil
		}
	}
	r, err := runSmart(t.Context(), quickEnv(), []smartTargetFunc{guarded("memory-a"), guarded("memory-b")})
	if err != nil {
		t.Fatal(err)
	}
	g.check(t, 2)
	if want := 2 * len(smartWorkloads) * len(quickSmartTasks) * len(smartVariants); len(r.Rows) != want {
		t.Errorf("%d rows, want %d", len(r.Rows), want)
	}
	if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, "held at the end over: memory-a, memory-b") {
		t.Errorf("notes: %s", notes)
	}
}
