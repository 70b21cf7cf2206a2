package tcp_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

// loopReference opens nodes of a fresh loop fabric: the reference the
// equivalence sequence on tcp is compared with.
type loopReference struct{}

var loopFabrics atomic.Int64

func (loopReference) Name() string { return "loop" }

func (loopReference) Open(t testing.TB, n int) []verbs.Device {
	t.Helper()
	f := loop.Get(fmt.Sprintf("tcp-equivalence%d", loopFabrics.Add(1)))
	devs := make([]verbs.Device, n)
	for i := range devs {
		d, err := verbs.Open(f.Address(fmt.Sprintf("n%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		devs[i] = d
	}
	return devs
}

// TestEquivalenceInProcess requires the equivalence sequence to give on
// tcp exactly the completions and memory it gives on loop.
func TestEquivalenceInProcess(t *testing.T) {
	verbstest.Equivalence(t, inProcess{}, loopReference{})
}

// TestEquivalenceCrossProcess is TestEquivalenceInProcess with the
// responder's device in a node process.
func TestEquivalenceCrossProcess(t *testing.T) {
	verbstest.Equivalence(t, crossProcess(sharedNode.Get), loopReference{})
}
