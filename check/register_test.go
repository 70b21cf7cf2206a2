package check

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestRegisterModel: reads see the latest write of their register;
// registers are independent; a write of unknown outcome may or may not
// be seen.
func TestRegisterModel(t *testing.T) {
	w := func(r, v uint64) RegisterInput { return RegisterInput{Write: true, Register: r, Value: v} }
	rd := func(r uint64) RegisterInput { return RegisterInput{Register: r} }
	h := NewRegisterHistory()
	h.Add(0, rd(1), RegisterOutput{0}, 0, 5, false)
	h.Add(0, w(1, 7), RegisterOutput{}, 10, 20, false)
	h.Add(1, rd(1), RegisterOutput{7}, 30, 40, false)
	h.Add(1, rd(2), RegisterOutput{0}, 30, 40, false)
	if res, _ := h.Check(time.Second); res != porcupine.Ok || h.Len() != 4 {
		t.Errorf("sequential: %v", res)
	}
	// A stale read after a completed write.
	h = NewRegisterHistory()
	h.Add(0, w(1, 7), RegisterOutput{}, 0, 10, false)
	h.Add(0, w(1, 8), RegisterOutput{}, 20, 30, false)
	h.Add(1, rd(1), RegisterOutput{7}, 40, 50, false)
	if res, _ := h.Check(time.Second); res != porcupine.Illegal {
		t.Errorf("stale read: %v, want Illegal", res)
	}
	// A new value, then the old one again: ABD without its write-back.
	h = NewRegisterHistory()
	h.Add(0, w(3, 9), RegisterOutput{}, 0, 0, true)
	h.Add(1, rd(3), RegisterOutput{9}, 10, 20, false)
	h.Add(2, rd(3), RegisterOutput{0}, 30, 40, false)
	if res, _ := h.Check(time.Second); res != porcupine.Illegal {
		t.Errorf("new then old: %v, want Illegal", res)
	}
	// An unknown write seen, or not.
	for _, v := range []uint64{0, 9} {
		h = NewRegisterHistory()
		h.Add(0, w(3, 9), RegisterOutput{}, 0, 0, true)
		h.Add(1, rd(3), RegisterOutput{v}, 10, 20, false)
		if res, _ := h.Check(time.Second); res != porcupine.Ok {
			t.Errorf("unknown write, read %d: %v", v, res)
		}
	}
}
