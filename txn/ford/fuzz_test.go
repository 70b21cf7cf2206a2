package ford

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

var fuzzLayout = Layout{F: 1, Buckets: 1024, ValueSize: 128, Coordinators: 8, LogSize: 4096}

// sampleLog is a valid record of two entries.
func sampleLog() []byte {
	b := make([]byte, fuzzLayout.LogSize)
	w := makeLock(3, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := encodeLog(b, w, []logEntry{
		{shard: 1, slot: 17, version: 5, present: true, key: []byte("acct/1"), value: []byte("99")},
		{shard: 2, slot: 1000, version: 1, present: false, key: []byte("gone")},
	})
	return b[:n]
}

// TestLogRoundTrip: a record decodes to what was encoded; every
// truncation and every flipped bit of it is detected (not logged).
func TestLogRoundTrip(t *testing.T) {
	b := sampleLog()
	r, err := decodeLog(b, &fuzzLayout, 3)
	if err != nil || len(r.entries) != 2 || string(r.entries[0].value) != "99" || r.entries[1].present || r.entries[0].slot != 17 {
		t.Fatalf("decoded %+v %v", r, err)
	}
	for n := range len(b) {
		if _, err := decodeLog(b[:n], &fuzzLayout, 3); !errors.Is(err, errBadLog) {
			t.Fatalf("a record torn at %d bytes decoded: %v", n, err)
		}
	}
	for i := range len(b) * 8 {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		if _, err := decodeLog(c, &fuzzLayout, 3); !errors.Is(err, errBadLog) {
			t.Fatalf("bit %d flipped: decoded (%v)", i, err)
		}
	}
	binaryTruncate := bytes.Clone(b)
	copy(binaryTruncate, make([]byte, 8))
	if _, err := decodeLog(binaryTruncate, &fuzzLayout, 3); !errors.Is(err, errBadLog) {
		t.Fatal("a truncated record decoded")
	}
}

// FuzzDecodeLog: hostile log areas never panic, and whatever decodes
// is within the layout and encodes back to the same bytes.
func FuzzDecodeLog(f *testing.F) {
	f.Add(sampleLog())
	f.Add([]byte{})
	f.Add(make([]byte, logHead))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeLog(b, &fuzzLayout, 3)
		if err != nil {
			if !errors.Is(err, errBadLog) {
				t.Fatalf("error %v is not errBadLog", err)
			}
			return
		}
		for _, e := range r.entries {
			if e.shard >= 3 || e.slot >= fuzzLayout.Buckets || len(e.key) == 0 || len(e.value) > fuzzLayout.ValueSize {
				t.Fatalf("an entry out of the layout: %+v", e)
			}
		}
		out := make([]byte, recordLen(r.entries))
		n := encodeLog(out, r.lock, r.entries)
		if !bytes.Equal(out[:n], b[:n]) {
			t.Fatalf("re-encoded record differs")
		}
	})
}

// sampleSlot is a slot holding key and value at version.
func sampleSlot(version uint64, key, value []byte, present bool) []byte {
	b := make([]byte, fuzzLayout.SlotSize())
	putImage(b[slotVersion:], version, key, present, value)
	return b
}

// TestSlotRoundTrip: an image decodes back; a flipped bit of its key,
// value, version or checksum is detected (torn).
func TestSlotRoundTrip(t *testing.T) {
	b := sampleSlot(7, []byte("k1"), []byte("value"), true)
	o, ok := decodeSlot(b, fuzzLayout.ValueSize)
	if !ok || o.version != 7 || string(o.key) != "k1" || string(o.value) != "value" || !o.present || o.lock != 0 {
		t.Fatalf("decoded %+v %v", o, ok)
	}
	for _, at := range []int{slotVersion, slotCRC, slotKey, slotValue + 2} {
		c := bytes.Clone(b)
		c[at] ^= 4
		if _, ok := decodeSlot(c, fuzzLayout.ValueSize); ok {
			t.Fatalf("a flipped byte at %d went unnoticed", at)
		}
	}
	if o, ok := decodeSlot(make([]byte, fuzzLayout.SlotSize()), fuzzLayout.ValueSize); !ok || o.klen != 0 {
		t.Fatal("an empty slot is not empty")
	}
}

// FuzzDecodeSlot: hostile slots never panic; what decodes is within
// limits and its image encodes back to the same bytes.
func FuzzDecodeSlot(f *testing.F) {
	f.Add(sampleSlot(7, []byte("k1"), []byte("value"), true))
	f.Add(sampleSlot(2, []byte("gone"), nil, false))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, ok := decodeSlot(b, fuzzLayout.ValueSize)
		if !ok || o.klen == 0 {
			return
		}
		if len(o.key) > 64 || len(o.value) > fuzzLayout.ValueSize {
			t.Fatalf("out of limits: %d-byte key, %d-byte value", len(o.key), len(o.value))
		}
		if !o.present {
			return
		}
		again := sampleSlot(o.version, o.key, o.value, true)
		p, ok := decodeSlot(again, fuzzLayout.ValueSize)
		if !ok || p.version != o.version || !bytes.Equal(p.key, o.key) || !bytes.Equal(p.value, o.value) {
			t.Fatal("re-encoded slot decodes differently")
		}
	})
}
