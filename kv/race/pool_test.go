package race

import (
	"encoding/binary"
	"testing"

	_ "github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestFreeRefusesGarbage: a client that sends the free RPC a malformed
// request or a range the node never handed out gets an error, and the
// node's free memory does not change.
func TestFreeRefusesGarbage(t *testing.T) {
	dev, err := verbs.Open("loop://race-free-garbage/node")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(pd, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	off, err := s.alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	o := &owner{} // the client the node handed off to
	o.held.add(off, 4096)
	base := s.mr.Addr()
	pair := func(addr uint64, n uint32) []byte {
		r := binary.LittleEndian.AppendUint64(nil, addr)
		return binary.LittleEndian.AppendUint32(r, n)
	}
	for name, req := range map[string][]byte{
		"short":                    {1, 2, 3},
		"trailing bytes":           append(pair(base+off, 64), 7),
		"below the region":         pair(base-64, 64),
		"in the directory":         pair(base, 64),
		"zero length":              pair(base+off, 0),
		"misaligned":               pair(base+off+1, 64),
		"odd length":               pair(base+off, 65),
		"past what was handed out": pair(base+s.bump, 64),
		"huge":                     pair(base+off, ^uint32(0)),
		"good, then garbage":       append(pair(base+off, 64), pair(base-64, 64)...),
	} {
		if _, err := s.freeRPC(o, req, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if len(s.held) != 0 || s.frees != 0 || o.held.bytes != 4096 {
		t.Fatalf("garbage changed the pool: %d held, %d frees", len(s.held), s.frees)
	}
	if _, err := s.freeRPC(o, pair(base+off, 4096), nil); err != nil || len(s.held) != 1 {
		t.Fatalf("a good free: %v, %d held", err, len(s.held))
	}
}
