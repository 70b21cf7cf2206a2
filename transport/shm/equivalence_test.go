package shm_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

// loopReference opens nodes of a fresh loop fabric: the reference the
// equivalence sequence on shm is compared with.
const loopReference = remotedev.LoopReference("shm-equivalence")

// TestEquivalenceInProcess requires the equivalence sequence to give on
// shm exactly the completions and memory it gives on loop.
func TestEquivalenceInProcess(t *testing.T) {
	verbstest.Equivalence(t, inProcess{}, loopReference)
}

// TestEquivalenceCrossProcess is TestEquivalenceInProcess with the
// responder's device in a node process.
func TestEquivalenceCrossProcess(t *testing.T) {
	verbstest.Equivalence(t, crossProcess(sharedNode.Get), loopReference)
}

// TestEquivalenceSingleThreaded is TestEquivalenceInProcess and
// TestEquivalenceCrossProcess with the requester's QPs and CQ
// SingleThreaded (lock-free post and poll).
func TestEquivalenceSingleThreaded(t *testing.T) {
	t.Run("in-process", func(t *testing.T) { verbstest.EquivalenceSingleThreaded(t, inProcess{}, loopReference) })
	t.Run("cross-process", func(t *testing.T) {
		verbstest.EquivalenceSingleThreaded(t, crossProcess(sharedNode.Get), loopReference)
	})
}
