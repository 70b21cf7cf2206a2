package shm_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

var devSeq atomic.Int64

// uniqueName is a device name no other test (or test process) uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, pid, devSeq.Add(1))
}

// inProcess opens shm devices in this process: every connection still
// goes through the abstract socket, memfds and separate mappings.
type inProcess struct{}

func (inProcess) Name() string { return "shm" }

func (inProcess) Open(t testing.TB, n int) []verbs.Device {
	t.Helper()
	devs := make([]verbs.Device, n)
	for i := range devs {
		d, err := verbs.Open("shm://" + uniqueName("conf"))
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

// Kill implements verbstest.Killer with shm.Crash.
func (inProcess) Kill(t testing.TB, d verbs.Device) {
	if err := shm.Crash(d); err != nil {
		t.Fatal(err)
	}
}
