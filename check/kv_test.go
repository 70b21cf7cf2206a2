package check

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func TestKVModel(t *testing.T) {
	// put(a,1) then get(a) → 1, sequential: linearizable.
	h := NewKVHistory()
	h.Add(0, KVInput{Kind: KVPut, Key: "a", Value: "1"}, KVOutput{}, 0, 10, false)
	h.Add(1, KVInput{Kind: KVGet, Key: "a"}, KVOutput{Value: "1", Found: true}, 20, 30, false)
	h.Add(1, KVInput{Kind: KVDelete, Key: "a"}, KVOutput{}, 40, 50, false)
	h.Add(0, KVInput{Kind: KVGet, Key: "a"}, KVOutput{}, 60, 70, false)
	if res, _ := h.Check(time.Second); res != porcupine.Ok {
		t.Errorf("a sequential history: %v", res)
	}
	// A stale read after a completed put: not linearizable.
	h = NewKVHistory()
	h.Add(0, KVInput{Kind: KVPut, Key: "a", Value: "1"}, KVOutput{}, 0, 10, false)
	h.Add(0, KVInput{Kind: KVPut, Key: "a", Value: "2"}, KVOutput{}, 20, 30, false)
	h.Add(1, KVInput{Kind: KVGet, Key: "a"}, KVOutput{Value: "1", Found: true}, 40, 50, false)
	if res, _ := h.Check(time.Second); res != porcupine.Illegal {
		t.Errorf("a stale read: %v, want Illegal", res)
	}
	// A put whose outcome is unknown may show up, late, or never.
	for _, found := range []bool{true, false} {
		h = NewKVHistory()
		h.Add(0, KVInput{Kind: KVPut, Key: "b", Value: "x"}, KVOutput{}, 0, 10, true)
		h.Add(1, KVInput{Kind: KVGet, Key: "b"}, KVOutput{Value: "x", Found: found}, 100, 110, false)
		if res, _ := h.Check(time.Second); res != porcupine.Ok {
			t.Errorf("unknown put, get found=%v: %v", found, res)
		}
	}
	// Keys are independent.
	h = NewKVHistory()
	h.Add(0, KVInput{Kind: KVPut, Key: "a", Value: "1"}, KVOutput{}, 0, 10, false)
	h.Add(1, KVInput{Kind: KVGet, Key: "b"}, KVOutput{}, 20, 30, false)
	if res, _ := h.Check(time.Second); res != porcupine.Ok || h.Len() != 2 {
		t.Errorf("two keys: %v, %d ops", res, h.Len())
	}
}
