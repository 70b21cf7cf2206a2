package nic

import (
	"testing"

	"github.com/rdmakit/rdmakit/verbs"
)

func TestFieldAdd(t *testing.T) {
	cases := []struct {
		x, y, boundary, want uint64
	}{
		{1, 2, 0, 3},
		{^uint64(0), 1, 0, 0},
		// two 32-bit fields: the carry out of bit 31 is dropped
		{0x00000001_ffffffff, 0x00000001_00000001, 1 << 31, 0x00000002_00000000},
		// four 16-bit fields
		{0xffff_0001_ffff_0002, 0x0001_0001_0001_0001, 1<<15 | 1<<31 | 1<<47, 0x0000_0002_0000_0003},
		// eight 8-bit fields
		{0xff01ff01ff01ff01, 0x0101010101010101, 0x8080808080808080, 0x0002000200020002},
	}
	for _, c := range cases {
		if got := fieldAdd(c.x, c.y, c.boundary); got != c.want {
			t.Errorf("fieldAdd(%#x, %#x, %#x) = %#x, want %#x", c.x, c.y, c.boundary, got, c.want)
		}
	}
}

func TestCompareWordOrder(t *testing.T) {
	all := [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	a := verbs.AtomicArgs{Compare: [4]uint64{5, 0, 0, 0}, CompareMask: all}
	cur := [4]uint64{5, 1, 0, 0} // word 0 equal, word 1 larger: cur > compare
	for op, want := range map[verbs.CompareOp]bool{
		verbs.CmpEqual: false, verbs.CmpNotEqual: true, verbs.CmpLess: false,
		verbs.CmpLessEqual: false, verbs.CmpGreater: true, verbs.CmpGreaterEqual: true,
	} {
		a.Op = op
		if got := compare(&cur, &a, 4); got != want {
			t.Errorf("%v: got %v want %v", op, got, want)
		}
	}
	// word 0 dominates: a smaller word 0 is smaller whatever follows
	cur = [4]uint64{4, ^uint64(0), ^uint64(0), ^uint64(0)}
	a.Op = verbs.CmpLess
	if !compare(&cur, &a, 4) {
		t.Error("word 0 is not the most significant")
	}
	// masked-out bits do not count
	a.CompareMask = [4]uint64{0xff, 0, 0, 0}
	cur = [4]uint64{0xaa05, 7, 7, 7}
	a.Op = verbs.CmpEqual
	if !compare(&cur, &a, 4) {
		t.Error("mask not applied")
	}
}

func TestLockStripeCoversOverlaps(t *testing.T) {
	var lt lockTable
	base := uint64(0x7f0000001000)
	for off := uint64(0); off < 32; off += 8 {
		if lt.lock(base+off) != lt.lock(base) {
			t.Fatalf("8-byte atomic at +%d takes another lock than the 32-byte one at +0", off)
		}
	}
	if lt.lock(base) == lt.lock(base+32) {
		t.Fatal("adjacent 32-byte granules share a stripe")
	}
}
