package objstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestRequestRoundTrip(t *testing.T) {
	ids := []ID{NewID(), NewID()}
	reqs := []request{
		{typ: msgCreate, reqID: 7, id: ids[0], dataSize: 4097, meta: []byte("m")},
		{typ: msgSeal, reqID: 1, id: ids[1]},
		{typ: msgGet, reqID: 2, ids: ids, timeout: -1},
		{typ: msgGet, reqID: 3, ids: ids[:1], timeout: time.Second},
		{typ: msgDelete, reqID: 4, ids: ids},
		{typ: msgFetch, reqID: 5, ids: ids},
		{typ: msgList, reqID: 6},
		{typ: msgCancel, reqID: 8},
	}
	for _, want := range reqs {
		b := encodeRequest(nil, &want)
		h, p, _, err := readFrame(bytes.NewReader(b), nil, maxRequestFrame)
		if err != nil {
			t.Fatal(err)
		}
		var got request
		if err := decodeRequest(h, p, &got); err != nil {
			t.Fatalf("%+v: %v", want, err)
		}
		if want.ids == nil {
			want.ids = []ID{}
		}
		if got.ids == nil {
			got.ids = []ID{}
		}
		if want.meta == nil && want.typ == msgCreate {
			want.meta = []byte{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, want %+v", got, want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	frame := func(typ byte, n uint32, payload []byte) []byte {
		b := []byte{typ, 1, 0, 0, 0, 0, 0, 0, 0}
		binary.LittleEndian.PutUint32(b[5:], n)
		return append(b, payload...)
	}
	huge := frame(msgCreate, maxRequestFrame+1, nil)
	if _, _, _, err := readFrame(bytes.NewReader(huge), nil, maxRequestFrame); !errors.Is(err, ErrProtocol) {
		t.Fatalf("oversized frame: %v", err)
	}
	bad := map[string][]byte{
		"unknown type":   frame(0x33, 0, nil),
		"short id":       frame(msgSeal, 3, []byte{1, 2, 3}),
		"trailing bytes": frame(msgList, 1, []byte{0}),
		"count too big":  frame(msgDelete, 4, []byte{0xff, 0xff, 0xff, 0x7f}),
		"negative size":  frame(msgCreate, IDSize+8, append(make([]byte, IDSize), 0, 0, 0, 0, 0, 0, 0, 0x80)),
	}
	for name, b := range bad {
		h, p, _, err := readFrame(bytes.NewReader(b), nil, maxRequestFrame)
		if err == nil {
			var r request
			err = decodeRequest(h, p, &r)
		}
		if !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", name, err)
		}
	}
}

func TestListRoundTrip(t *testing.T) {
	want := []ObjectInfo{
		{ID: NewID(), DataSize: 10, MetadataSize: 2, Sealed: true, RefCount: 3, CreatedAt: time.Unix(5, 6)},
		{ID: NewID(), CreatedAt: time.Unix(7, 0)},
	}
	b := encodeList(9, want)
	got, err := decodeList(b[headerSize+1:])
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.DataSize != w.DataSize || g.MetadataSize != w.MetadataSize || g.Sealed != w.Sealed || g.RefCount != w.RefCount || !g.CreatedAt.Equal(w.CreatedAt) {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// FuzzDecodeRequest feeds arbitrary bytes to the store's decoder: it
// must never panic, never allocate for a frame over the limit, and what
// it accepts must encode back to the same frame.
func FuzzDecodeRequest(f *testing.F) {
	id := NewID()
	for _, r := range []request{
		{typ: msgCreate, id: id, dataSize: 10, meta: []byte("xy")},
		{typ: msgGet, ids: []ID{id, id}, timeout: time.Millisecond},
		{typ: msgDelete, ids: []ID{id}},
		{typ: msgRelease, id: id},
	} {
		f.Add(encodeRequest(nil, &r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		var req request
		for {
			h, p, _, err := readFrame(r, nil, maxRequestFrame)
			if err != nil {
				return
			}
			if h.n > maxRequestFrame {
				t.Fatalf("accepted a frame of %d bytes", h.n)
			}
			if decodeRequest(h, p, &req) != nil {
				continue
			}
			again := encodeRequest(nil, &req)
			h2, p2, _, err := readFrame(bytes.NewReader(again), nil, maxRequestFrame)
			if err != nil {
				t.Fatal(err)
			}
			var req2 request
			if err := decodeRequest(h2, p2, &req2); err != nil {
				t.Fatalf("re-encoded request does not decode: %v", err)
			}
			if !bytes.Equal(again, encodeRequest(nil, &req2)) {
				t.Fatalf("encoding not stable")
			}
		}
	})
}

// FuzzDecodeReply feeds arbitrary payloads to the client's reply
// decoders: errors, never panics.
func FuzzDecodeReply(f *testing.F) {
	f.Add(encodeList(1, []ObjectInfo{{ID: NewID()}})[headerSize+1:])
	f.Add([]byte{2, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeList(b)
		_, _ = perID(b, []ID{{}, {}}, "fuzz")
		p := payload{b: b}
		p.count(getEntrySize, maxIDs)
		_ = errorOf(p.u8())
	})
}
