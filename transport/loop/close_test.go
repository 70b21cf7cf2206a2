package loop_test

import (
	"errors"
	"testing"

	_ "github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestCloseLeavesMemoryUsable closes a device under a registered region
// whose bytes the application still holds: using them must not fault
// the process, and the late Deregister reports an error.
func TestCloseLeavesMemoryUsable(t *testing.T) {
	d, err := verbs.Open("loop://close-under-mr/a")
	if err != nil {
		t.Fatal(err)
	}
	pd, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.AllocMR(1<<20, verbs.AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	b := mr.Bytes()
	b[0], b[len(b)-1] = 1, 2
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	b[0], b[len(b)-1] = 3, 4 // would fault if the pages were unmapped
	if b[0] != 3 || b[len(b)-1] != 4 {
		t.Fatalf("memory after close: %d %d", b[0], b[len(b)-1])
	}
	if err := mr.Deregister(); !errors.Is(err, verbs.ErrInvalidState) {
		t.Fatalf("Deregister after Close: %v, want ErrInvalidState", err)
	}
}
