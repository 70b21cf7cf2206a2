package membership

import (
	"fmt"
	"testing"
)

// TestConfigurationCodec: what Marshal encodes, Unmarshal
// decodes; a truncated or out-of-range one is refused.
func TestConfigurationCodec(t *testing.T) {
	c := Initial(4, 2)
	if !c.Remove(1) || c.Remove(1) {
		t.Fatal("remove: a node out twice")
	}
	b := c.Marshal()
	got, err := Unmarshal(b)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(c) {
		t.Fatalf("got %+v, %v; want %+v", got, err, c)
	}
	for i := range len(b) {
		if _, err := Unmarshal(b[:i]); err == nil {
			t.Fatalf("a %d-byte prefix of %d decoded", i, len(b))
		}
	}
	bad := append([]byte(nil), b...)
	bad[len(bad)-1] = 9 // a backup named 9 of 4 nodes
	if _, err := Unmarshal(bad); err == nil {
		t.Fatal("a node out of range decoded")
	}
}

// FuzzConfiguration: decoding never panics, and what decodes encodes
// back to the same bytes.
func FuzzConfiguration(f *testing.F) {
	c := Initial(3, 1)
	f.Add(c.Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Unmarshal(b)
		if err != nil {
			return
		}
		if got := c.Marshal(); string(got) != string(normalizeOut(b, len(c.Out))) {
			t.Fatalf("%x decoded to %+v, encoded to %x", b, c, got)
		}
	})
}

// normalizeOut maps the out bytes of an encoded configuration to 0 or 1
// (the decoder takes any byte but 1 for in).
func normalizeOut(b []byte, nodes int) []byte {
	out := append([]byte(nil), b...)
	for i := range nodes {
		if out[9+i] != 1 {
			out[9+i] = 0
		}
	}
	return out
}

// FuzzAnswer: decoding a query's answer never panics.
func FuzzAnswer(f *testing.F) {
	c := Initial(3, 1)
	f.Add(append(append([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, byte(len(c.Marshal())), 0}, c.Marshal()...), 'p'))
	f.Add([]byte{1, 'n', 'o'})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return // Query refuses an empty frame before decoding
		}
		a, err := decodeAnswer(b)
		if err == nil && len(a.Out) != len(a.Primaries) {
			t.Fatalf("%x decoded to %+v", b, a)
		}
	})
}
