package rpc

import (
	"encoding/binary"
	"sync"
	"testing"

	_ "github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

var (
	fuzzOnce   sync.Once
	fuzzRegion *herdRegion
	fuzzErr    error
)

// fuzzHerd is one HERD region of 4 slots of 64-byte messages on a loop
// device, shared by the fuzz iterations.
func fuzzHerd(s *Server) (*herdRegion, error) {
	fuzzOnce.Do(func() {
		dev, err := verbs.Open("loop://rpc-fuzz/server")
		if err != nil {
			fuzzErr = err
			return
		}
		pd, err := dev.AllocPD()
		if err != nil {
			fuzzErr = err
			return
		}
		var req [8]byte
		binary.LittleEndian.PutUint32(req[:], 4)
		binary.LittleEndian.PutUint32(req[4:], MinMessage)
		fuzzRegion, _, fuzzErr = s.openHerd(pd, req[:], make([]byte, 16))
	})
	return fuzzRegion, fuzzErr
}

// FuzzDecoders feeds arbitrary bytes to everything that decodes a
// message: the server's request dispatch, the client's response
// matching, and the HERD region scan (the bytes are the region's
// contents). None may panic; answers must fit their buffers.
func FuzzDecoders(f *testing.F) {
	msg := make([]byte, Header+16)
	putHeader(msg, 1, 0, 7)
	f.Add(msg)
	f.Add([]byte{1, 0, 1, 0, 0, 0, 0, 0, 'x'})
	f.Add(make([]byte, 4*herdStride(MinMessage)))
	s := NewServer(ServerConfig{})
	s.Handle(1, func(req, resp []byte) (int, error) { return copy(resp, req), nil })
	s.Handle(2, func(req, resp []byte) (int, error) { return len(req) * 2, nil })
	f.Fuzz(func(t *testing.T, b []byte) {
		out := make([]byte, MinMessage)
		if n := s.handle(b, out); n < 0 || n > len(out) {
			t.Fatalf("handle answered %d bytes into %d", n, len(out))
		}
		c := &Client{calls: make([]call, 4)}
		for i := range c.calls {
			c.calls[i].done = make(chan struct{}, 1)
			c.calls[i].resp = make([]byte, 8)
		}
		c.deliver(b)
		h, err := fuzzHerd(s)
		if err != nil {
			t.Fatal(err)
		}
		region := h.req.Bytes()
		copy(region, b)
		for i := range h.busy {
			h.busy[i] = false
		}
		sends, _, err := h.scan(s, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, wr := range sends {
			if int(wr.SGL[0].Length) > h.size {
				t.Fatalf("a %d-byte answer to a %d-byte client", wr.SGL[0].Length, h.size)
			}
		}
		clear(region)
		clear(h.last)
	})
}
