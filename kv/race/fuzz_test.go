package race

import (
	"bytes"
	"testing"
)

// FuzzBlock decodes arbitrary bytes as a KV block, as a lookup does with
// what it READs: never a panic; a block that verifies re-encodes to the
// same bytes.
func FuzzBlock(f *testing.F) {
	b := make([]byte, blockLen(3, 5))
	putBlock(b, []byte("key"), []byte("value"))
	f.Add(b)
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = blockSize(b)
		k, v, ok := readBlock(b)
		if !ok {
			return
		}
		again := make([]byte, blockLen(len(k), len(v)))
		putBlock(again, k, v)
		if !bytes.Equal(again, b[:len(again)]) {
			t.Fatalf("block %x re-encodes to %x", b, again)
		}
	})
}
