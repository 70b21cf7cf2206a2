package loop_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

// loopProvider opens the nodes of a fresh fabric per case and injects
// faults through the fabric.
type loopProvider struct {
	remotedev.LoopReference // Name and Open: the nodes n0 … n(n-1) of a fresh fabric
}

var (
	_ verbstest.Killer      = loopProvider{}
	_ verbstest.Pauser      = loopProvider{}
	_ verbstest.Partitioner = loopProvider{}
	_ verbstest.Delayer     = loopProvider{}
)

// fabricOf returns the fabric and node name of a loop device.
func fabricOf(t testing.TB, d verbs.Device) (*loop.Fabric, string) {
	t.Helper()
	u, err := url.Parse(d.Address())
	if err != nil || u.Scheme != loop.Scheme {
		t.Fatalf("not a loop device: %q", d.Address())
	}
	return loop.Get(u.Host), strings.Trim(u.Path, "/")
}

func fatalIf(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Kill implements verbstest.Killer.
func (loopProvider) Kill(t testing.TB, d verbs.Device) {
	f, n := fabricOf(t, d)
	fatalIf(t, f.Kill(n))
}

// Pause implements verbstest.Pauser.
func (loopProvider) Pause(t testing.TB, d verbs.Device) {
	f, n := fabricOf(t, d)
	fatalIf(t, f.Pause(n))
}

// Resume implements verbstest.Pauser.
func (loopProvider) Resume(t testing.TB, d verbs.Device) {
	f, n := fabricOf(t, d)
	fatalIf(t, f.Resume(n))
}

// Partition implements verbstest.Partitioner.
func (loopProvider) Partition(t testing.TB, a, b verbs.Device) {
	f, na := fabricOf(t, a)
	_, nb := fabricOf(t, b)
	fatalIf(t, f.Partition(na, nb))
}

// Heal implements verbstest.Partitioner.
func (loopProvider) Heal(t testing.TB, a, b verbs.Device) {
	f, na := fabricOf(t, a)
	_, nb := fabricOf(t, b)
	fatalIf(t, f.Heal(na, nb))
}

// SetLatency implements verbstest.Delayer.
func (loopProvider) SetLatency(t testing.TB, a, b verbs.Device, d time.Duration) {
	f, na := fabricOf(t, a)
	_, nb := fabricOf(t, b)
	fatalIf(t, f.SetLatency(na, nb, d))
}

// TestConformance runs the verbs conformance suite on the loop fabric.
func TestConformance(t *testing.T) {
	verbstest.Run(t, loopProvider{})
}

// TestEquivalence runs the cross-transport equivalence sequence twice on
// the loop fabric, the other transports' reference: it must be
// deterministic.
func TestEquivalence(t *testing.T) {
	verbstest.Equivalence(t, loopProvider{}, loopProvider{})
}

// TestEquivalenceSingleThreaded: the sequence with the requester's QPs
// and CQ SingleThreaded gives loop's own trace.
func TestEquivalenceSingleThreaded(t *testing.T) {
	verbstest.EquivalenceSingleThreaded(t, loopProvider{}, loopProvider{})
}
