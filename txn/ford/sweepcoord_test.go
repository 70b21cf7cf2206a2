package ford_test

import (
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestSweepCoordinator: a coordinator dead with its locks taken and no
// log; SweepCoordinator on its id, called within the lease, waits it out
// and releases them (Sweep alone would have left them live); another
// client's live lock is left alone; a bad id is refused.
func TestSweepCoordinator(t *testing.T) {
	b := crashBed(t)
	ctx := tctx(t)
	loader, pa, pb := b.loadedPair(t, ctx)
	id := b.stoppedTransfer(t, ctx, pa, pb, ford.StepValidated)
	sw, err := loader.SweepCoordinator(ctx, id)
	if err != nil || sw.Live != 0 || sw.Recovered != 2 {
		t.Fatalf("SweepCoordinator within the lease: %+v %v, want its 2 locks (one per record) recovered", sw, err)
	}
	if got, err := balances(ctx, loader, pa, pb); err != nil || got[0] != 100 || got[1] != 100 {
		t.Fatalf("after the roll-back: %v %v", got, err)
	}
	// Another client's lock under a live lease stays.
	holder := b.leased(nil)
	htx, _ := holder.Begin(ctx)
	if err := htx.Put(pa, []byte("7")); err != nil {
		t.Fatal(err)
	}
	hid := htx.(*ford.Tx).Coordinator()
	if sw, err := loader.SweepCoordinator(ctx, (hid+1)%(3*smallLayout.Coordinators)); err != nil || sw.Live != 1 || sw.Recovered != 0 {
		t.Fatalf("SweepCoordinator of another id: %+v %v, want the live lock left", sw, err)
	}
	htx.Abort()
	if _, err := loader.SweepCoordinator(ctx, -1); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Fatalf("SweepCoordinator(-1): %v", err)
	}
}
