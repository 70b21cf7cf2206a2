package verbstest

import (
	"fmt"
	"testing"

	"github.com/rdmakit/rdmakit/verbs"
)

const ones = ^uint64(0)

// words reads n native-endian words at b[off:].
func words(b []byte, off, n int) [4]uint64 {
	var w [4]uint64
	for i := 0; i < n; i++ {
		w[i] = u64(b, off+8*i)
	}
	return w
}

// setWords stores n words at b[off:].
func setWords(b []byte, off, n int, w [4]uint64) {
	for i := 0; i < n; i++ {
		put64(b, off+8*i, w[i])
	}
}

// refCompare is the reference comparison of a masked CAS: the masked
// remote value against the masked operand, word 0 most significant.
func refCompare(r, c, mask [4]uint64, n int, op verbs.CompareOp) bool {
	cmp := 0
	for i := 0; i < n && cmp == 0; i++ {
		x, y := r[i]&mask[i], c[i]&mask[i]
		switch {
		case x < y:
			cmp = -1
		case x > y:
			cmp = 1
		}
	}
	switch op {
	case verbs.CmpEqual:
		return cmp == 0
	case verbs.CmpNotEqual:
		return cmp != 0
	case verbs.CmpLess:
		return cmp < 0
	case verbs.CmpLessEqual:
		return cmp <= 0
	case verbs.CmpGreater:
		return cmp > 0
	case verbs.CmpGreaterEqual:
		return cmp >= 0
	}
	panic("bad op")
}

// refFieldAdd is the reference masked fetch-and-add of one word: fields
// end at the set bits of boundary; carries stay inside a field.
func refFieldAdd(x, y, boundary uint64) uint64 {
	var out uint64
	lo := 0
	for bit := 0; bit < 64; bit++ {
		if boundary&(1<<bit) == 0 && bit != 63 {
			continue
		}
		width := bit - lo + 1
		mask := ones >> (64 - width)
		out |= (((x >> lo) & mask) + ((y >> lo) & mask)) & mask << lo
		lo = bit + 1
	}
	return out
}

// maskedCASCase checks every compare operator at one size against remote
// values below, equal to and above the operand, with word 0 deciding
// where it differs from the later words.
func maskedCASCase(size int) Case {
	return parallel(fmt.Sprintf("MaskedCAS%d", size), func(t *testing.T, p Provider) {
		pr := newPair(t, p, pairOpts{})
		if pr.a.dev.Attr().MaskedAtomicSizes&uint32(size) == 0 {
			t.Skipf("device has no %d-byte masked atomics", size)
		}
		n := size / 8
		r := [4]uint64{1 << 40, 2, 3, 4}
		var operands [][4]uint64
		switch n {
		case 1:
			operands = [][4]uint64{{1<<40 - 1}, {1 << 40}, {1<<40 + 1}, {1 << 63}}
		case 2:
			// {0, max} < R although its word 1 is larger; {1<<40, 3} > R by word 1.
			operands = [][4]uint64{{0, ones}, r, {1 << 40, 3}, {1 << 40, 1}, {1<<40 + 1, 0}}
		case 4:
			operands = [][4]uint64{{0, ones, ones, ones}, r, {1 << 40, 2, 4, 0}, {1 << 40, 2, 3, 3}, {1<<40 + 1, 0, 0, 0}}
		}
		all := [4]uint64{ones, ones, ones, ones}
		swap := [4]uint64{0xaaaa, 0xbbbb, 0xcccc, 0xdddd}
		id := uint64(0)
		for op := verbs.CmpEqual; op <= verbs.CmpGreaterEqual; op++ {
			for _, c := range operands {
				id++
				setWords(pr.mb.Bytes(), 64, 4, r)
				a := verbs.AtomicArgs{Size: uint8(size), Op: op, Compare: c, CompareMask: all, Swap: swap, SwapMask: all}
				checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, masked(id, verbs.OpMaskedCmpAndSwp, pr.mb, 64, sg(pr.ma, 0, size), a)), id, verbs.WCMaskedCompSwap)
				want := r
				if refCompare(r, c, all, n, op) {
					copy(want[:n], swap[:n])
				}
				if got := words(pr.mb.Bytes(), 64, 4); got != want {
					t.Errorf("%v: remote %x %v operand %x: remote became %x, want %x", op, r[:n], op, c[:n], got[:n], want[:n])
				}
				if got := words(pr.ma.Bytes(), 0, n); got != words(wordsBytes(r), 0, n) {
					t.Errorf("%v: returned %x, want the original %x", op, got[:n], r[:n])
				}
			}
		}
	})
}

func wordsBytes(w [4]uint64) []byte {
	b := make([]byte, 32)
	setWords(b, 0, 4, w)
	return b
}

// maskedFAACase checks field-wise addition at one size.
func maskedFAACase(size int) Case {
	return parallel(fmt.Sprintf("MaskedFAA%d", size), func(t *testing.T, p Provider) {
		pr := newPair(t, p, pairOpts{})
		if pr.a.dev.Attr().MaskedAtomicSizes&uint32(size) == 0 {
			t.Skipf("device has no %d-byte masked atomics", size)
		}
		n := size / 8
		tests := []struct {
			r, add, boundary [4]uint64
		}{
			// No boundaries: each word is one field and carries never cross words.
			{[4]uint64{1, ones, ones, 7}, [4]uint64{1, 1, 2, 1}, [4]uint64{}},
			// 8-bit fields: 0xff+1 wraps to 0 without touching the next byte.
			{[4]uint64{0x01020304050607ff, 0xffffffffffffffff, 0x80, 0}, [4]uint64{0x0101010101010101, 0x0101010101010101, 0x80, 5}, [4]uint64{0x8080808080808080, 0x8080808080808080, 0x8080808080808080, 0x8080808080808080}},
			// Two 32-bit fields; uneven fields (bits 0..3, 4..47, 48..63).
			{[4]uint64{0x00000001ffffffff, 0xffff00000000000f, 0xffffffffffffffff, 0x0000ffffffffffff}, [4]uint64{0x0000000100000001, 0x0001000000000001, 0x0001000000000011, 1}, [4]uint64{1 << 31, 1<<3 | 1<<47, 1<<3 | 1<<47, 1 << 47}},
		}
		for i, tc := range tests {
			id := uint64(i + 1)
			setWords(pr.mb.Bytes(), 32, 4, tc.r)
			a := verbs.AtomicArgs{Size: uint8(size), Swap: tc.add, SwapMask: tc.boundary}
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, masked(id, verbs.OpMaskedFetchAndAdd, pr.mb, 32, sg(pr.ma, 0, size), a)), id, verbs.WCMaskedFetchAdd)
			want := tc.r
			for w := 0; w < n; w++ {
				want[w] = refFieldAdd(tc.r[w], tc.add[w], tc.boundary[w])
			}
			if got := words(pr.mb.Bytes(), 32, 4); got != want {
				t.Errorf("case %d: %x + %x (boundaries %x) = %x, want %x", i, tc.r[:n], tc.add[:n], tc.boundary[:n], got[:n], want[:n])
			}
			if got := words(pr.ma.Bytes(), 0, n); got != words(wordsBytes(tc.r), 0, n) {
				t.Errorf("case %d: returned %x, want the original %x", i, got[:n], tc.r[:n])
			}
		}
	})
}

// atomicCases cover masked compare-and-swap and fetch-and-add.
func atomicCases() []Case {
	return []Case{
		maskedCASCase(8),
		maskedCASCase(16),
		maskedCASCase(32),
		maskedFAACase(8),
		maskedFAACase(16),
		maskedFAACase(32),
		parallel("MaskedFAAFieldBoundaries", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			// Hard-coded expectations, independent of the reference model.
			for i, tc := range []struct{ r, add, boundary, want uint64 }{
				{0x01020304050607ff, 0x0101010101010101, 0x8080808080808080, 0x0203040506070800},
				{0x01020304050607ff, 0x0101010101010101, 0, 0x0203040506070900},
				{0x00000001ffffffff, 0x0000000100000001, 1 << 31, 0x0000000200000000},
				{0xffffffffffffffff, 1, 1 << 63, 0},
				{0x000000000000000f, 1, 1 << 3, 0},
				{0x000000000000000f, 1, 1 << 4, 0x10},
			} {
				put64(pr.mb.Bytes(), 0, tc.r)
				a := verbs.AtomicArgs{Size: 8, Swap: [4]uint64{tc.add}, SwapMask: [4]uint64{tc.boundary}}
				expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, masked(uint64(i), verbs.OpMaskedFetchAndAdd, pr.mb, 0, sg(pr.ma, 0, 8), a))
				if got := u64(pr.mb.Bytes(), 0); got != tc.want {
					t.Errorf("%#x + %#x with boundaries %#x = %#x, want %#x", tc.r, tc.add, tc.boundary, got, tc.want)
				}
			}
		}),
		parallel("MaskedCASSeparateMasks", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			// 8 bytes: compare only the top byte, swap only the low byte.
			put64(pr.mb.Bytes(), 0, 0x1122334455667788)
			a := verbs.AtomicArgs{Size: 8, Op: verbs.CmpEqual,
				Compare: [4]uint64{0x11ffffffffffffff}, CompareMask: [4]uint64{0xff00000000000000},
				Swap: [4]uint64{0xaaaaaaaaaaaaaa99}, SwapMask: [4]uint64{0xff}}
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, masked(1, verbs.OpMaskedCmpAndSwp, pr.mb, 0, sg(pr.ma, 0, 8), a))
			if got := u64(pr.mb.Bytes(), 0); got != 0x1122334455667799 {
				t.Fatalf("masked swap gave %#x, want 0x1122334455667799", got)
			}
			// The compare mask now covers a differing byte: no swap.
			a.CompareMask[0] = 0xff000000000000ff
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, masked(2, verbs.OpMaskedCmpAndSwp, pr.mb, 0, sg(pr.ma, 0, 8), a))
			if got := u64(pr.mb.Bytes(), 0); got != 0x1122334455667799 {
				t.Fatalf("failed compare changed memory to %#x", got)
			}
			// 16 bytes: compare only word 1, swap only word 0; a zero
			// compare mask on word 0 ignores its mismatch.
			setWords(pr.mb.Bytes(), 16, 2, [4]uint64{100, 200})
			a = verbs.AtomicArgs{Size: 16, Op: verbs.CmpEqual,
				Compare: [4]uint64{999, 200}, CompareMask: [4]uint64{0, ones},
				Swap: [4]uint64{0x55, 0x66}, SwapMask: [4]uint64{ones, 0}}
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, masked(3, verbs.OpMaskedCmpAndSwp, pr.mb, 16, sg(pr.ma, 0, 16), a))
			if got := words(pr.mb.Bytes(), 16, 2); got != [4]uint64{0x55, 200} {
				t.Fatalf("16-byte masked CAS gave %x, want [55 c8]", got[:2])
			}
			// A zero swap mask swaps nothing even when the compare holds.
			a.Compare = [4]uint64{0, 200}
			a.SwapMask = [4]uint64{}
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, masked(4, verbs.OpMaskedCmpAndSwp, pr.mb, 16, sg(pr.ma, 0, 16), a))
			if got := words(pr.mb.Bytes(), 16, 2); got != [4]uint64{0x55, 200} {
				t.Fatalf("zero swap mask changed memory to %x", got[:2])
			}
		}),
		parallel("MaskedCASWordOrder", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			// Word 0 is most significant: {2,0,0,0} > {1,max,max,max}.
			r := [4]uint64{2, 0, 0, 0}
			for i, tc := range []struct {
				op   verbs.CompareOp
				swap bool
			}{{verbs.CmpGreater, true}, {verbs.CmpGreaterEqual, true}, {verbs.CmpLess, false}, {verbs.CmpLessEqual, false}} {
				setWords(pr.mb.Bytes(), 0, 4, r)
				a := verbs.AtomicArgs{Size: 32, Op: tc.op, Compare: [4]uint64{1, ones, ones, ones},
					CompareMask: [4]uint64{ones, ones, ones, ones}, Swap: [4]uint64{9, 9, 9, 9}, SwapMask: [4]uint64{ones, ones, ones, ones}}
				expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, masked(uint64(i), verbs.OpMaskedCmpAndSwp, pr.mb, 0, sg(pr.ma, 0, 32), a))
				swapped := words(pr.mb.Bytes(), 0, 4) == [4]uint64{9, 9, 9, 9}
				if swapped != tc.swap {
					t.Errorf("{2,0,0,0} %v {1,max,max,max}: swapped=%v, want %v", tc.op, swapped, tc.swap)
				}
			}
		}),
		parallel("MaskedAtomicBadArgs", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			bad := func(what string, w verbs.SendWR, sentinel error) {
				t.Helper()
				err := pr.qa.PostSend([]verbs.SendWR{w})
				if err == nil {
					t.Errorf("%s: post succeeded", what)
					wait1(t, pr.a.cq)
					return
				}
				wantPostErr(t, err, 0, sentinel)
			}
			for _, size := range []uint8{0, 4, 12, 24, 64} {
				bad(fmt.Sprintf("size %d", size), masked(1, verbs.OpMaskedCmpAndSwp, pr.mb, 0, sg(pr.ma, 0, int(size)), verbs.AtomicArgs{Size: size}), verbs.ErrInvalidArg)
			}
			bad("16-byte CAS with an 8-byte result", masked(1, verbs.OpMaskedCmpAndSwp, pr.mb, 0, sg(pr.ma, 0, 8), verbs.AtomicArgs{Size: 16}), verbs.ErrInvalidArg)
			bad("32-byte FAA with a 16-byte result", masked(1, verbs.OpMaskedFetchAndAdd, pr.mb, 0, sg(pr.ma, 0, 16), verbs.AtomicArgs{Size: 32}), verbs.ErrInvalidArg)
			w := masked(1, verbs.OpMaskedCmpAndSwp, pr.mb, 0, sg(pr.ma, 0, 8), verbs.AtomicArgs{Size: 8, Op: 6})
			bad("compare operator 6", w, verbs.ErrInvalidArg)
			bad("CAS with a 4-byte result", cas(1, pr.mb, 0, sg(pr.ma, 0, 4), 0, 1), verbs.ErrInvalidArg)
			bad("FAA with a 16-byte result", faa(1, pr.mb, 0, sg(pr.ma, 0, 16), 1), verbs.ErrInvalidArg)
			bad("FAA with an empty result", faa(1, pr.mb, 0, verbs.SGE{}, 1), verbs.ErrInvalidArg)
			if pr.qa.State() != verbs.StateRTS {
				t.Errorf("rejected posts moved the QP to %v", pr.qa.State())
			}
			quiet(t, pr.a.cq)
		}),
	}
}
