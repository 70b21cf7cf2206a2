package tcp_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

// inProcess opens tcp devices in this process, each with its own soft NIC
// listening on a loopback port: every request crosses a real TCP
// connection.
type inProcess struct{}

func (inProcess) Name() string { return "tcp" }

func (inProcess) Open(t testing.TB, n int) []verbs.Device {
	t.Helper()
	devs := make([]verbs.Device, n)
	for i := range devs {
		d, err := verbs.Open("tcp://127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		devs[i] = d
	}
	return devs
}

func TestConformanceInProcess(t *testing.T) {
	verbstest.Run(t, inProcess{})
}

var _ verbstest.Killer = inProcess{}

// Kill implements verbstest.Killer with tcp.Crash.
func (inProcess) Kill(t testing.TB, d verbs.Device) {
	if err := tcp.Crash(d); err != nil {
		t.Fatal(err)
	}
}

var (
	_ verbstest.Pauser      = inProcess{}
	_ verbstest.Partitioner = inProcess{}
)

// Pause implements verbstest.Pauser with tcp.Pause.
func (inProcess) Pause(t testing.TB, d verbs.Device) {
	if err := tcp.Pause(d); err != nil {
		t.Fatal(err)
	}
}

// Resume implements verbstest.Pauser with tcp.Resume.
func (inProcess) Resume(t testing.TB, d verbs.Device) {
	if err := tcp.Resume(d); err != nil {
		t.Fatal(err)
	}
}

// Partition implements verbstest.Partitioner: each side cuts the other.
func (inProcess) Partition(t testing.TB, a, b verbs.Device) {
	if err := tcp.Partition(a, b.Address()); err != nil {
		t.Fatal(err)
	}
	if err := tcp.Partition(b, a.Address()); err != nil {
		t.Fatal(err)
	}
}

// Heal implements verbstest.Partitioner.
func (inProcess) Heal(t testing.TB, a, b verbs.Device) {
	if err := tcp.Heal(a, b.Address()); err != nil {
		t.Fatal(err)
	}
	if err := tcp.Heal(b, a.Address()); err != nil {
		t.Fatal(err)
	}
}
