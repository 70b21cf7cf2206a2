package race

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/verbs"
)

// split divides subtable sub in two while other clients go on: readers
// never wait; writers find the subtable locked and retry.
//
//  1. Lock: CAS the lock bit into the control word, then wait until the
//     writers inside have left.
//  2. If the subtable's depth is the global depth, double the directory
//     (under the directory lock): copy the entries to the upper half, then
//     raise the global depth.
//  3. Read the subtable and the keys of its blocks; write the new subtable
//     with the keys whose next hash bit is 1 (same bucket positions).
//  4. Point the directory entries of that half at the new subtable, bumping
//     the versions of all the entries of both halves (under the directory
//     lock).
//  5. Clear the moved keys from the old subtable and unlock it with the
//     new depth.
//
// A reader that misses a key because it moved (step 5) sees a changed
// directory entry (step 4) and looks again; a hit anywhere is current,
// since no writer runs while the two copies exist.
// It reports false (and no error) when another client holds the lock.
func (c *Client) split(ctx context.Context, sub uint64) (bool, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return false, c.mapErr(err)
	}
	released := false
	defer func() {
		if !released {
			c.ops.Release(s)
		}
	}()
	one := func(w verbs.SendWR) error {
		w.Flags |= verbs.FlagSignaled
		return c.do(ctx, s, []verbs.SendWR{w})
	}
	read := func(addr uint64, off, n int) error {
		return one(verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{s.SGE(off, n)}, RemoteAddr: addr, RKey: c.rkey})
	}
	cas := func(addr, old, nw uint64) (uint64, error) {
		w := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: addr, RKey: c.rkey}
		w.Atomic.Compare[0], w.Atomic.Swap[0] = old, nw
		if err := one(w); err != nil {
			return 0, err
		}
		return binary.NativeEndian.Uint64(s.Buf[offCAS:]), nil
	}
	word := func(off int) uint64 { return binary.NativeEndian.Uint64(s.Buf[off:]) }
	fail := func(err error) error {
		released = true // the slot belongs to the failed operation now
		return c.mapErr(err)
	}

	// 1. Lock the subtable.
	if err := read(sub, offCtl, 8); err != nil {
		return false, fail(err)
	}
	ctl := word(offCtl)
	for {
		if ctl&ctlLock != 0 {
			return false, nil // another client is splitting it: the caller retries
		}
		got, err := cas(sub, ctl, ctl|ctlLock)
		if err != nil {
			return false, fail(err)
		}
		if got == ctl {
			break
		}
		ctl = got
	}
	for wait := time.Microsecond; ; wait = min(2*wait, time.Millisecond) {
		if err := read(sub, offCtl, 8); err != nil {
			return false, fail(err)
		}
		if word(offCtl)&ctlCount == 0 {
			break
		}
		time.Sleep(wait)
	}
	d, suffix := ctlDepth(ctl), ctlSuffix(ctl)
	// unlock sets the depth and clears the lock by CAS: writers that
	// found the subtable locked are still leaving (their FETCH_AND_ADD of
	// -1 is on its way), so the count must be kept, never overwritten.
	unlock := func(depth uint) error {
		cur := ctl | ctlLock
		for {
			got, err := cas(sub, cur, cur&ctlCount|mkCtl(depth, suffix, false))
			if err != nil {
				return err
			}
			if got == cur {
				return nil
			}
			cur = got
		}
	}
	if d >= MaxDepth {
		if err := unlock(d); err != nil {
			return false, fail(err)
		}
		return false, fmt.Errorf("%w: a subtable at the largest depth (%d) is full", kv.ErrFull, MaxDepth)
	}

	// A new subtable.
	var req [4]byte
	var resp [8]byte
	binary.LittleEndian.PutUint32(req[:], subtableSize)
	if _, err := c.rpc.Call(ctx, methodAlloc, req[:], resp[:]); err != nil {
		if uerr := unlock(d); uerr != nil {
			return false, fail(uerr)
		}
		return false, c.mapErr(err)
	}
	nsub := binary.LittleEndian.Uint64(resp[:])

	// 3. Read the subtable; find each key's next hash bit.
	img := c.dirMR.Bytes()[:subtableSize]
	dirSGE := verbs.SGE{Addr: c.dirMR.Addr(), Length: subtableSize, LKey: c.dirMR.LKey()}
	if err := one(verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{dirSGE}, RemoteAddr: sub, RKey: c.rkey}); err != nil {
		return false, fail(err)
	}
	moved := make([]bool, Groups*3*bucketSlots)
	for i := range moved {
		w := binary.NativeEndian.Uint64(img[ctlBytes+8*i:])
		if w == 0 {
			continue
		}
		n := min(slotUnits(w)*blockUnit, blockHead+kv.MaxKey)
		if err := read(slotAddr(w), offBlock, n); err != nil {
			return false, fail(err)
		}
		kl := int(binary.LittleEndian.Uint16(s.Buf[offBlock:]))
		if kl == 0 || blockHead+kl > n {
			continue // cannot be: blocks are written before their slots
		}
		h := kv.Hash(s.Buf[offBlock+blockHead : offBlock+blockHead+kl])
		moved[i] = h>>d&1 == 1
	}
	// The new subtable: the moved slots, at the same positions.
	out := s.Buf[offNew : offNew+subtableSize]
	clear(out)
	binary.NativeEndian.PutUint64(out, mkCtl(d+1, suffix|1<<d, false))
	for i, m := range moved {
		if m {
			copy(out[ctlBytes+8*i:ctlBytes+8*i+8], img[ctlBytes+8*i:])
		}
	}
	if err := one(verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{s.SGE(offNew, subtableSize)}, RemoteAddr: nsub, RKey: c.rkey}); err != nil {
		return false, fail(err)
	}

	// 2 and 4, under the directory lock.
	for wait := time.Microsecond; ; wait = min(2*wait, time.Millisecond) {
		got, err := cas(c.base+8, 0, c.id)
		if err != nil {
			return false, fail(err)
		}
		if got == 0 {
			break
		}
		time.Sleep(wait)
	}
	if err := read(c.base, offDepth, 8); err != nil {
		return false, fail(err)
	}
	gd := uint(word(offDepth))
	dirBuf := c.dirMR.Bytes()
	dirAll := func(n int) verbs.SGE {
		return verbs.SGE{Addr: c.dirMR.Addr(), Length: uint32(8 * n), LKey: c.dirMR.LKey()}
	}
	if err := one(verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{dirAll(1 << gd)}, RemoteAddr: c.base + dirOff, RKey: c.rkey}); err != nil {
		return false, fail(err)
	}
	if d == gd {
		copy(dirBuf[8<<gd:16<<gd], dirBuf[:8<<gd])
		upper := verbs.SGE{Addr: c.dirMR.Addr() + 8<<gd, Length: uint32(8 << gd), LKey: c.dirMR.LKey()}
		if err := one(verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{upper}, RemoteAddr: c.base + dirOff + 8<<gd, RKey: c.rkey}); err != nil {
			return false, fail(err)
		}
		gd++
		binary.NativeEndian.PutUint64(s.Buf[offDepth:], uint64(gd))
		if err := one(verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{s.SGE(offDepth, 8)}, RemoteAddr: c.base, RKey: c.rkey}); err != nil {
			return false, fail(err)
		}
	}
	for i := 0; i < 1<<gd; i++ {
		e := binary.NativeEndian.Uint64(dirBuf[8*i:])
		if dirAddr(e) != sub {
			continue
		}
		target := sub
		if i>>d&1 == 1 {
			target = nsub
		}
		binary.NativeEndian.PutUint64(dirBuf[8*i:], mkDir(target, d+1, dirVersion(e)+1))
	}
	if err := one(verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{dirAll(1 << gd)}, RemoteAddr: c.base + dirOff, RKey: c.rkey}); err != nil {
		return false, fail(err)
	}
	binary.NativeEndian.PutUint64(s.Buf[offCAS:], 0)
	if err := one(verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: c.base + 8, RKey: c.rkey}); err != nil {
		return false, fail(err)
	}

	// 5. Clear the moved slots from the old subtable, then unlock it.
	if err := read(sub, offNew, subtableSize); err != nil { // (unchanged since step 3: no writer ran)
		return false, fail(err)
	}
	for i, m := range moved {
		if m {
			clear(s.Buf[offNew+ctlBytes+8*i : offNew+ctlBytes+8*i+8])
		}
	}
	if err := one(verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{s.SGE(offNew+ctlBytes, subtableSize-ctlBytes)}, RemoteAddr: sub + ctlBytes, RKey: c.rkey}); err != nil {
		return false, fail(err)
	}
	if err := unlock(d + 1); err != nil {
		return false, fail(err)
	}
	c.splits.Add(1)
	c.ops.Release(s)
	released = true
	return true, c.refreshLocked(ctx)
}
