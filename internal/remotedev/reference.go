package remotedev

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

// LoopReference is the verbstest provider a transport's equivalence run is
// compared with: nodes of a fresh loop fabric, named after the string.
type LoopReference string

var _ verbstest.Provider = LoopReference("")

var loopFabrics atomic.Int64

// Name implements verbstest.Provider.
func (LoopReference) Name() string { return "loop" }

// Open implements verbstest.Provider.
func (r LoopReference) Open(t testing.TB, n int) []verbs.Device {
	t.Helper()
	f := loop.Get(fmt.Sprintf("%s%d", string(r), loopFabrics.Add(1)))
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
