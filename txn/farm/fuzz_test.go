package farm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/rdmakit/rdmakit/txn"
)

// TestRecordRoundTrip: what appendRecord encodes, parseRecord decodes.
func TestRecordRoundTrip(t *testing.T) {
	r := record{kind: recCommitBackup, shard: 2, seq: 1 << 40, trunc: []uint64{3, 5}, info: txInfo{parts: []int{0, 2}, sids: []uint32{4, 0, 9}},
		writes: []write{{op: opPut, version: 9, key: []byte("k1"), value: []byte("v")}, {op: opDelete, version: 4, key: []byte("k2")}}}
	got, err := parseRecord(appendRecord(nil, &r), 3, 16)
	if err != nil {
		t.Fatal(err)
	}
	if got.kind != r.kind || got.shard != r.shard || got.seq != r.seq || len(got.trunc) != 2 || got.trunc[1] != 5 ||
		len(got.info.parts) != 2 || got.info.parts[1] != 2 || got.info.sids[2] != 9 || len(got.writes) != 2 || got.writes[0].version != 9 ||
		!bytes.Equal(got.writes[0].value, []byte("v")) || got.writes[1].op != opDelete {
		t.Fatalf("got %+v, want %+v", got, r)
	}
	if _, err := parseRecord(appendRecord(nil, &r), 2, 16); err == nil {
		t.Fatal("a record of shard 2 accepted in a database of 2 shards")
	}
	l := Layout{Nodes: []string{"a:1", "b:2", "c:3"}, F: 1, Buckets: 64, ValueSize: 100}
	back, err := unmarshalLayout(l.marshal())
	if err != nil || !back.equal(&l) {
		t.Fatalf("layout %+v: %+v %v", l, back, err)
	}
}

// TestSlotTornDetected: a slot whose bytes mix two writes fails its CRC.
func TestSlotTornDetected(t *testing.T) {
	const vs = 64
	a, b := make([]byte, slotValue+vs), make([]byte, slotValue+vs)
	writeSlot(a, []byte("key"), true, bytes.Repeat([]byte{1}, 40), 3, true)
	writeSlot(b, []byte("key"), true, bytes.Repeat([]byte{2}, 40), 4, true)
	if o, ok := decodeSlot(a, vs); !ok || o.version() != 3 || !bytes.Equal(o.value, bytes.Repeat([]byte{1}, 40)) {
		t.Fatalf("a whole slot: %+v %v", o, ok)
	}
	for cut := 8; cut < len(a); cut += 8 { // a READ that copied a's first bytes and b's others, or the reverse
		mix := append(append([]byte{}, a[:cut]...), b[cut:]...)
		if _, ok := decodeSlot(mix, vs); ok && !bytes.Equal(mix[slotCRC:], a[slotCRC:]) && !bytes.Equal(mix[slotCRC:], b[slotCRC:]) {
			t.Fatalf("cut at %d: a torn slot decoded", cut)
		}
		if o, ok := decodeSlot(mix, vs); ok && o.version() != 3 && o.version() != 4 {
			t.Fatalf("cut at %d: version %d", cut, o.version())
		}
		if o, ok := decodeSlot(mix, vs); ok && o.version() == 4 && !bytes.Equal(o.value, bytes.Repeat([]byte{2}, 40)) ||
			ok && o.version() == 3 && !bytes.Equal(o.value, bytes.Repeat([]byte{1}, 40)) {
			t.Fatalf("cut at %d: a version with another's value", cut)
		}
	}
	locked := append([]byte{}, a...)
	binary.LittleEndian.PutUint64(locked, 3|lockBit)
	if o, ok := decodeSlot(locked, vs); !ok || !o.locked() || o.version() != 3 {
		t.Fatalf("a locked slot: %+v %v", o, ok)
	}
}

// TestRingWrap: records written as a client does, read as the node does,
// across laps, with skips, and never overtaking the reader.
func TestRingWrap(t *testing.T) {
	const size = 256
	ring := make([]byte, ringHead+size)
	rd := ringReader{ring: ring, size: size}
	w := ringWriter{size: size}
	for i := range 200 {
		body := bytes.Repeat([]byte{byte(i)}, 8+i%50)
		length := (recHeader + len(body) + 7) &^ 7
		pos, skipAt, skip, _, ok := w.reserve(length)
		if !ok { // the node takes what there is, then there is room
			got := 0
			for {
				b, ok := rd.next()
				if !ok {
					break
				}
				got++
				_ = b
			}
			rd.done()
			w.consumed = binary.LittleEndian.Uint64(ring)
			if pos, skipAt, skip, _, ok = w.reserve(length); !ok {
				t.Fatalf("record %d: no room after the node took %d records", i, got)
			}
		}
		if skip {
			w.putHeader(ringData(ring)[skipAt%size:], recHeader, skipAt)
		}
		off := pos % size
		copy(ringData(ring)[off+recHeader:], body)
		w.putHeader(ringData(ring)[off:], length, pos)
		b, ok := rd.next()
		if !ok || !bytes.Equal(b[:len(body)], body) {
			t.Fatalf("record %d: read %v %x", i, ok, b)
		}
	}
	if rd.pos < 4*size {
		t.Fatalf("only %d bytes went round a %d-byte ring", rd.pos, size)
	}
}

// FuzzRecord: no record bytes make the decoder panic.
func FuzzRecord(f *testing.F) {
	r := record{kind: recCommitBackup, shard: 1, seq: 9, trunc: []uint64{1}, info: txInfo{parts: []int{1}, sids: []uint32{0, 1, 2}},
		writes: []write{{op: opPut, key: []byte("k"), value: []byte("v")}}}
	f.Add(appendRecord(nil, &r))
	f.Add(appendRecord(nil, &record{kind: recAbort, seq: 3}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := parseRecord(b, 3, 64); err == nil {
			for _, w := range r.writes {
				if len(w.key) == 0 || len(w.value) > 64 {
					t.Fatalf("a bad write decoded: %+v", w)
				}
			}
		}
		_, _ = unmarshalLayout(b)
		_, _ = decodeSlot(append(b, make([]byte, slotValue+64)...), 64)
	})
}

// FuzzRing: a ring holding any bytes makes the reader neither panic nor
// read outside the ring.
func FuzzRing(f *testing.F) {
	f.Add(make([]byte, ringHead+64))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < ringHead+8 {
			return
		}
		size := (len(b) - ringHead) &^ 7
		rd := ringReader{ring: b[:ringHead+size], size: size}
		for range 64 {
			body, ok := rd.next()
			if !ok {
				return
			}
			if len(body) > size {
				t.Fatalf("a %d-byte body from a %d-byte ring", len(body), size)
			}
		}
	})
}

// TestHomesSpread: a shard's keys use all of its table's homes, whatever
// the table size's factors in common with the shard count.
func TestHomesSpread(t *testing.T) {
	for _, buckets := range []int{1 << 14, 16353 + MaxProbe - 1, 3 * 1000} {
		l := Layout{Nodes: []string{"a", "b", "c"}, Buckets: buckets}
		used := map[int]bool{}
		n := 0
		for i := 0; n < 4*buckets; i++ {
			k := []byte(fmt.Sprintf("key/%d", i))
			if txn.Shard(k, 3) != 1 {
				continue
			}
			n++
			used[l.home(txn.Hash(k))] = true
		}
		if want := (buckets - MaxProbe + 1) * 9 / 10; len(used) < want {
			t.Fatalf("%d buckets: %d homes used by %d keys of one shard, want %d", buckets, len(used), n, want)
		}
	}
}

// TestRingStaleBodies: where the writer has not written in this lap the
// reader finds no record, even when the old lap's bodies there hold
// words that look like this lap's headers.
func TestRingStaleBodies(t *testing.T) {
	const size = 256
	ring := make([]byte, ringHead+size)
	rd := ringReader{ring: ring, size: size}
	w := ringWriter{size: size}
	body := make([]byte, 56)
	for i := 0; i < len(body); i += 8 { // a 24-byte record of lap 1, if read as a header
		binary.LittleEndian.PutUint64(body[i:], recordHeader(24, size, size))
	}
	put := func(b []byte) {
		length := (recHeader + len(b) + 7) &^ 7
		pos, _, _, _, ok := w.reserve(length)
		if !ok {
			t.Fatal("no room")
		}
		copy(ringData(ring)[pos%size+recHeader:], b)
		w.putHeader(ringData(ring)[pos%size:], length, pos)
	}
	for range size / 64 { // lap 0: four records of old bodies
		put(body)
		if _, ok := rd.next(); !ok {
			t.Fatal("a lap-0 record not read")
		}
	}
	rd.done()
	w.consumed = binary.LittleEndian.Uint64(ring)
	put(make([]byte, 16)) // lap 1: one 24-byte record at offset 0
	if _, ok := rd.next(); !ok {
		t.Fatal("the lap-1 record not read")
	}
	if b, ok := rd.next(); ok {
		t.Fatalf("a record read where none was written in this lap: %x", b)
	}
}
