package txnexp

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/txn"
)

// countingDB counts its commits as a FORD client counts its read-write
// commits' round trips: two each.
type countingDB struct {
	txn.DB
	commits *atomic.Uint64
}

func (d countingDB) Begin(ctx context.Context) (txn.Tx, error) {
	tx, err := d.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return countingTx{tx.(txntraced), d.commits}, nil
}

type countingTx struct {
	txntraced
	commits *atomic.Uint64
}

func (t countingTx) Commit() error {
	err := t.txntraced.Commit()
	if err == nil {
		t.commits.Add(1)
	}
	return err
}

// txn-peers with a FaRM and a FORD (in-memory systems, the FORD one
// counting two commit round trips per commit, three at most): FORD's
// note gives the SmallBank points' mean commit round trips, the most,
// and its rate against FaRM's.
func TestPeersFordNote(t *testing.T) {
	var stopped atomic.Int32
	ford := memSystem(fordName, &stopped)
	inner := ford.start
	ford.start = func(ctx context.Context, env *bench.Env, size dbSize) (*deployment, error) {
		d, err := inner(ctx, env, size)
		if err != nil {
			return nil, err
		}
		var n atomic.Uint64
		d.db = countingDB{d.db, &n}
		d.commitTrips = func() (uint64, uint64, uint64) { c := n.Load(); return 2 * c, c, 3 }
		return d, nil
	}
	r, err := runPeers(t.Context(), quickEnv(), []system{memSystem("FaRM", &stopped), ford})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"FORD over memory: its read-write SmallBank commits took 2.00 round trips on average", "no commit of the run took more than 3",
		"SmallBank at 32 clients: FORD "} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q: %s", want, notes)
		}
	}
	if stopped.Load() != 2 {
		t.Errorf("%d systems stopped, want 2", stopped.Load())
	}
}
