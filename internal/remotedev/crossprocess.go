package remotedev

import (
	"testing"

	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

// CrossProcess is a verbstest provider that opens device 0 in this
// process and devices 1…n-1 in a node child, driven through proxies:
// their NICs live in the other process, and their memory regions (memfds)
// are mapped here too. Each transport's tests fill in its URIs and crash.
type CrossProcess struct {
	// Label is the provider's name.
	Label string
	// Local and Remote return the URI of a device opened in this process
	// and in the node (which must give memfd-backed regions).
	Local, Remote func() string
	// Crash crashes a device of this process (the transport's Crash); the
	// node's devices are crashed with the same function in the node, as
	// TestMain's WithCrash option says.
	Crash func(verbs.Device) error
	// Node returns the node child to open remote devices in.
	Node func(t testing.TB) *Node
}

var _ verbstest.Killer = CrossProcess{}

// Name implements verbstest.Provider.
func (p CrossProcess) Name() string { return p.Label }

// Open implements verbstest.Provider.
func (p CrossProcess) Open(t testing.TB, n int) []verbs.Device {
	t.Helper()
	devs := make([]verbs.Device, n)
	for i := range devs {
		var d verbs.Device
		var err error
		if i == 0 {
			d, err = verbs.Open(p.Local())
		} else {
			d, err = p.Node(t).Client.Open(p.Remote())
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs[i] = d
	}
	return devs
}

// Kill implements verbstest.Killer: the transport's crash, run in the
// device's process.
func (p CrossProcess) Kill(t testing.TB, d verbs.Device) {
	crash := p.Crash
	if IsProxy(d) {
		crash = Crash
	}
	if err := crash(d); err != nil {
		t.Fatal(err)
	}
}
