package prismkv

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/verbs"
)

// change is one install list: a slot and the value it is expected to
// hold, and what goes in it.
type change struct {
	slot       int
	oldP, oldN uint64
	n          int  // the new item's length (in s.Buf[offNew:]); unused by a delete
	del        bool // install the free item instead of a new one
	// check makes the CAS conditional on the item the slot points to
	// being key's (an indirect masked CAS that swaps nothing): a slot
	// whose key was deleted may hold another key's item by now, even at
	// the same address and length (the buffer recycled).
	check []byte
	// seg ≥ 0: the lock of segment seg is held with token: the CAS is
	// conditional on it still being held, and the list releases it.
	seg   int
	token uint64
	// raise > 0: the node's distance word is raised to raise first (the
	// new key goes that far from its home slot).
	raise int
}

// changed is what an install list did.
type changed struct {
	installed  bool
	keyOK      bool   // the slot pointed to key's item (or no check)
	newP       uint64 // the allocated item (0 for a delete)
	curP, curN uint64 // the slot's value before the CAS
}

// run posts the install list of ch in s: [ALLOCATE → WRITE length]
// [key check] [lock test] CONDITIONAL CAS [unlock] [READ the allocated
// address]. An error leaves s no longer the caller's (a failed status
// releases it).
func (c *Client) run(ctx context.Context, s remote.Slot, ch change) (changed, error) {
	var wrs [8]verbs.SendWR
	var sgl [8]verbs.SGE
	w := 0
	add := func(wr verbs.SendWR, sge verbs.SGE) {
		sgl[w] = sge
		wr.SGL = sgl[w : w+1]
		wrs[w] = wr
		w++
	}
	if !ch.del {
		add(verbs.SendWR{Opcode: verbs.OpAllocate, Flags: verbs.FlagRedirect, RKey: c.rkey, Queue: c.class(ch.n),
			RedirectAddr: verbs.ScratchAddr(0)}, s.SGE(offNew, ch.n))
		binary.NativeEndian.PutUint64(s.Buf[offScratch:], uint64(ch.n)) // the WRITE's source: inline, copied at post
		add(verbs.SendWR{Opcode: verbs.OpWrite, Flags: verbs.FlagInline, RemoteAddr: verbs.ScratchAddr(8)}, s.SGE(offScratch, 8))
	}
	var want, mask [4]uint64
	if ch.check != nil {
		want, mask = keyCheck(ch.check)
		add(verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, Flags: verbs.FlagIndirect, RemoteAddr: c.slotAddr(ch.slot), RKey: c.rkey,
			Atomic: verbs.AtomicArgs{Size: 32, Op: verbs.CmpEqual, Compare: want, CompareMask: mask}}, s.SGE(offCheck, 32))
	}
	if ch.raise > 0 {
		d := uint64(ch.raise)
		add(verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, RemoteAddr: c.dist, RKey: c.rkey,
			Atomic: verbs.AtomicArgs{Size: 8, Op: verbs.CmpLess, Compare: [4]uint64{d}, Swap: [4]uint64{d},
				CompareMask: [4]uint64{^uint64(0)}, SwapMask: [4]uint64{^uint64(0)}}}, s.SGE(offDist+8, 8))
	}
	if ch.seg >= 0 {
		lockFlags := verbs.SendFlags(0) // after the raise, whatever it found
		if ch.check != nil {
			lockFlags = verbs.FlagConditional // and the key check
		}
		add(verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, Flags: lockFlags, RemoteAddr: c.lockAddr(ch.seg), RKey: c.rkey,
			Atomic: verbs.AtomicArgs{Size: 8, Op: verbs.CmpEqual, Compare: [4]uint64{ch.token}, CompareMask: [4]uint64{^uint64(0)}}},
			s.SGE(offLock, 8))
	}
	// A CAS that does not run leaves its result untouched: make it one
	// that cannot pass for the old value.
	binary.NativeEndian.PutUint64(s.Buf[offCAS:], ^ch.oldP)
	binary.NativeEndian.PutUint64(s.Buf[offCAS+8:], ^ch.oldN)
	cas := verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, Flags: c.cond(w), RemoteAddr: c.slotAddr(ch.slot), RKey: c.rkey,
		Atomic: verbs.AtomicArgs{Size: 16, Op: verbs.CmpEqual, Compare: [4]uint64{ch.oldP, ch.oldN},
			CompareMask: [4]uint64{^uint64(0), ^uint64(0)}, SwapMask: [4]uint64{^uint64(0), ^uint64(0)}}}
	if ch.del {
		cas.Atomic.Swap = [4]uint64{c.free, itemHead}
	} else {
		cas.Flags |= verbs.FlagIndirectArg
		cas.ArgAddr = verbs.ScratchAddr(0)
	}
	add(cas, s.SGE(offCAS, 16))
	if ch.seg >= 0 {
		add(verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, RemoteAddr: c.lockAddr(ch.seg), RKey: c.rkey,
			Atomic: verbs.AtomicArgs{Compare: [4]uint64{ch.token}}}, s.SGE(offLock+8, 8))
	}
	if !ch.del {
		add(verbs.SendWR{Opcode: verbs.OpRead, RemoteAddr: verbs.ScratchAddr(0)}, s.SGE(offScratch, 8))
	}
	wrs[w-1].Flags |= verbs.FlagSignaled
	wc, err := c.ops.Do(ctx, s, wrs[:w])
	if err != nil {
		return changed{}, err
	}
	if wc.Status != verbs.StatusSuccess && wc.Status != verbs.StatusSkipped { // a DELETE's last step is its CAS
		c.ops.Release(s)
		return changed{}, fmt.Errorf("%w: PUT chain: %w", kv.ErrUnreachable, wc.Status.Err())
	}
	r := changed{keyOK: true,
		curP: binary.NativeEndian.Uint64(s.Buf[offCAS:]), curN: binary.NativeEndian.Uint64(s.Buf[offCAS+8:])}
	if !ch.del {
		r.newP = binary.NativeEndian.Uint64(s.Buf[offScratch:])
	}
	if ch.check != nil {
		for i := range want {
			if binary.NativeEndian.Uint64(s.Buf[offCheck+8*i:])&mask[i] != want[i]&mask[i] {
				r.keyOK = false
			}
		}
	}
	locked := ch.seg < 0 || binary.NativeEndian.Uint64(s.Buf[offLock:]) == ch.token
	r.installed = r.keyOK && locked && r.curP == ch.oldP && r.curN == ch.oldN
	return r, nil
}

// cond is the flags of a request that runs only if the one before it
// (the w-th of the list) succeeded: every step after the first.
func (c *Client) cond(w int) verbs.SendFlags {
	if w == 0 {
		return 0
	}
	return verbs.FlagConditional
}

// keyCheck is the compare value and mask of a 32-byte masked CAS on an
// item that holds when the item is key's (its length and first 24
// bytes) and neither empty nor free. The words are the item's bytes in
// the node's byte order, as the NIC loads them.
func keyCheck(key []byte) (want, mask [4]uint64) {
	var wb, mb [32]byte
	binary.LittleEndian.PutUint16(wb[:], uint16(len(key)))
	mb[0], mb[1], mb[2] = 0xff, 0xff, flagEmpty|flagFree
	k := copy(wb[itemHead:], key)
	for i := 0; i < k; i++ {
		mb[itemHead+i] = 0xff
	}
	for i := range want {
		want[i] = binary.NativeEndian.Uint64(wb[8*i:])
		mask[i] = binary.NativeEndian.Uint64(mb[8*i:])
	}
	return want, mask
}
