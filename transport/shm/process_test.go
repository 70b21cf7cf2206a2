package shm_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

// sharedNode is the node process of the cross-process runs.
var sharedNode remotedev.SharedNode

// crossProcess opens device 0 in this process and devices 1…n-1 in a node
// process: their NICs, rings and sessions live in the other process, and
// their memory regions (memfds, as every shm region is) are mapped here
// too.
func crossProcess(node func(testing.TB) *remotedev.Node) remotedev.CrossProcess {
	uri := func() string { return "shm://" + uniqueName("xproc") }
	return remotedev.CrossProcess{Label: "shm (cross-process)", Local: uri, Remote: uri, Crash: shm.Crash, Node: node}
}

func TestConformanceCrossProcess(t *testing.T) {
	verbstest.Run(t, crossProcess(sharedNode.Get))
}
