package pilaf

import (
	"bytes"
	"testing"
)

// FuzzLayout decodes arbitrary bytes as an index entry and as an extent,
// as a GET does with what it READs: never a panic, and what decodes
// re-encodes to the same bytes.
func FuzzLayout(f *testing.F) {
	var e [entrySize]byte
	putEntry(e[:], entry{addr: 4096, length: 20, meta: metaValid | 7, extCRC: 99})
	f.Add(e[:])
	ext := make([]byte, extentLen(3, 5))
	putExtent(ext, []byte("key"), []byte("value"))
	f.Add(ext)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= entrySize {
			if got, empty, ok := readEntry(b[:entrySize]); ok && !empty {
				var again [entrySize]byte
				putEntry(again[:], got)
				if !bytes.Equal(again[:], b[:entrySize]) {
					t.Fatalf("entry %x re-encodes to %x", b[:entrySize], again)
				}
			}
		}
		if k, v, ok := readExtent(b); ok {
			again := make([]byte, extentLen(len(k), len(v)))
			putExtent(again, k, v)
			if !bytes.Equal(again[8:], b[8:]) || len(again) != len(b) {
				t.Fatalf("extent %x re-encodes to %x", b, again)
			}
		}
	})
}
