//go:build !race

package shm_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// Not under the race detector: nic.DumpQPs reads the QPs' fields
// without their locks by design (a stuck QP's lock may be held for good),
// which the detector reports as a race with the QP failing meanwhile.

// TestDumpAfterLinkFailed: nic.DumpQPs (what `kill -USR1` prints) shows
// a QP whose link failed and unmapped its rings without touching them
// (it faulted on the unmapped ring while a prism-tx client was dumped).
func TestDumpAfterLinkFailed(t *testing.T) {
	a, b := mustEndpoint(t, 4096), mustEndpoint(t, 4096)
	connectPair(t, a, b)
	if wc, err := postWait(a.qp, a.cq, verbs.SendWR{Opcode: verbs.OpRead}); err != nil || wc.Status != verbs.StatusSuccess {
		t.Fatalf("READ: %+v %v", wc, err)
	}
	b.dev.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var buf bytes.Buffer
		nic.DumpQPs(&buf)
		if strings.Contains(buf.String(), "), closed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no QP with a closed link in the dump after its peer closed:\n%s", buf.String())
		}
		// A request makes the link notice its peer is gone.
		postWait(a.qp, a.cq, verbs.SendWR{Opcode: verbs.OpRead})
		time.Sleep(10 * time.Millisecond)
	}
}
