package tcp_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

// loopReference opens nodes of a fresh loop fabric: the reference the
// equivalence sequence on tcp is compared with.
const loopReference = remotedev.LoopReference("tcp-equivalence")

// TestEquivalenceInProcess requires the equivalence sequence to give on
// tcp exactly the completions and memory it gives on loop.
func TestEquivalenceInProcess(t *testing.T) {
	verbstest.Equivalence(t, inProcess{}, loopReference)
}

// TestEquivalenceCrossProcess is TestEquivalenceInProcess with the
// responder's device in a node process.
func TestEquivalenceCrossProcess(t *testing.T) {
	verbstest.Equivalence(t, crossProcess(sharedNode.Get), loopReference)
}
