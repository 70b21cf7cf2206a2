package prismkv

import (
	"bytes"
	"testing"
)

// FuzzItem decodes arbitrary bytes as an item, as a GET does with what its
// indirect READ returns: never a panic; what decodes re-encodes.
func FuzzItem(f *testing.F) {
	b := make([]byte, itemLen(3, 5))
	putItem(b, []byte("key"), []byte("value"), flagTomb)
	f.Add(b)
	f.Add([]byte{0, 0, flagEmpty, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, v, fl, ok := readItem(b)
		if !ok {
			return
		}
		again := make([]byte, itemLen(len(k), len(v)))
		putItem(again, k, v, fl)
		if !bytes.Equal(again[:3], b[:3]) || !bytes.Equal(again[4:], b[4:]) {
			t.Fatalf("item %x re-encodes to %x", b, again)
		}
	})
}
