package sherman_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/btree/sherman"
)

// FuzzDecode feeds arbitrary bytes to the node decoder (leaf and
// internal): it must return a node or errTorn, never panic.
func FuzzDecode(f *testing.F) {
	size := sherman.NodeSizeOf(small)
	f.Add(make([]byte, size))
	b := make([]byte, size)
	b[8] = 1 // an internal node with a zero leftmost: torn
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		n := make([]byte, size)
		copy(n, b)
		err := sherman.Decode(small, n)
		if len(b) == 0 && err != nil {
			t.Fatalf("zeroed memory is an empty leaf: %v", err)
		}
		_ = sherman.Decode(small, b)
	})
}
