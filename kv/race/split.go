package race

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/verbs"
)

// split divides subtable sub in two while other clients go on: readers
// never wait; writers find the subtable locked and retry.
//
//  1. Lock: CAS the lock bit into the control word and write the
//     client's lease next to it, then wait until the writers inside have
//     left, for one lease at most (lock, drain).
//  2. If the subtable's depth is the global depth, double the directory
//     (under the directory lock): copy the entries to the upper half, then
//     raise the global depth (double).
//  3. Read the subtable and the keys of its blocks; write the new subtable
//     with the keys whose next hash bit is 1 (same bucket positions)
//     (classify, copyOut).
//  4. Point the directory entries of that half at the new subtable, bumping
//     the versions of all the entries of both halves (under the directory
//     lock) (publish, repoint).
//  5. Clear the moved keys from the old subtable and unlock it with the
//     new depth (clearMoved, unlock).
//
// A reader that misses a key because it moved (step 5) sees a changed
// directory entry (step 4) and looks again; a hit anywhere is current,
// since no writer runs while the two copies exist.
//
// Every change to the table after the lock runs only while the client
// still holds its lease (lease.go): a splitter that stalled past its
// lease and was taken over changes nothing more. The requests run under
// c.bg: a split the caller gave up on still finishes (or its lease runs
// out). It reports false (and no error) when another client holds the
// lock, or took it over.
func (c *Client) split(ctx context.Context, sub uint64) (bool, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return false, c.mapErr(err)
	}
	sp := splitter{c: c, s: s, sub: sub}
	ok, err := sp.lock()
	if err != nil || !ok {
		c.putBack(s, err)
		return false, c.mapErr(err)
	}
	c.hook(hookSplitLocked)
	err = sp.run()
	c.putBack(s, err)
	if errors.Is(err, errLease) {
		return false, nil // taken over: the new holder finishes it
	}
	if err != nil {
		return false, err
	}
	c.splits.Add(1)
	return true, c.refreshLocked(ctx)
}

// run is a split once the subtable is locked: steps 1 (drain) to 5.
func (sp *splitter) run() error {
	c := sp.c
	if err := sp.drain(); err != nil {
		return c.mapErr(err)
	}
	if sp.d >= MaxDepth {
		if err := sp.unlock(sp.d); err != nil {
			return c.mapErr(err)
		}
		return fmt.Errorf("%w: a subtable at the largest depth (%d) is full", kv.ErrFull, MaxDepth)
	}
	nsub, err := c.allocSubtable(c.bg)
	if err != nil {
		if uerr := sp.unlock(sp.d); uerr != nil {
			return c.mapErr(uerr)
		}
		return c.mapErr(err)
	}
	// 3. Copy the moving half into the new subtable.
	moved, err := sp.classify()
	if err != nil {
		return c.mapErr(err)
	}
	if err := sp.copyOut(nsub, moved); err != nil {
		return c.mapErr(err)
	}
	// 2 and 4, under the directory lock.
	if err := sp.publish(nsub); err != nil {
		return c.mapErr(err)
	}
	c.hook(hookSplitPublished)
	// 5. Clear the moved slots from the old subtable, then unlock it.
	if err := sp.clearMoved(moved); err != nil {
		return c.mapErr(err)
	}
	if err := sp.unlock(sp.d + 1); err != nil {
		return c.mapErr(err)
	}
	return c.mapErr(unlockNew(c, sp.s, nsub, sp.nlease))
}

// splitter is one split in progress: the client's slot, the subtable and
// its control word as found when locking it, and the leases held.
type splitter struct {
	c      *Client
	s      remote.Slot
	sub    uint64
	ctl    uint64 // the control word the lock CAS replaced
	d      uint   // the subtable's local depth
	suffix uint64
	lease  uint64    // the lease word written next to the control word
	beatAt time.Time // when lease was written
	dir    uint64    // the directory lock's word while held, else 0
	nlease uint64    // the new subtable's lease word (copyOut)
}

// one runs a single signaled request in the split's slot.
func (sp *splitter) one(w verbs.SendWR) error {
	w.Flags |= verbs.FlagSignaled
	return sp.c.do(sp.c.bg, sp.s, []verbs.SendWR{w})
}

// read READs n bytes at addr into the slot's buffer at off.
func (sp *splitter) read(addr uint64, off, n int) error {
	return sp.one(verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{sp.s.SGE(off, n)}, RemoteAddr: addr, RKey: sp.c.rkey})
}

// word is the 8 bytes at off in the slot's buffer.
func (sp *splitter) word(off int) uint64 { return binary.NativeEndian.Uint64(sp.s.Buf[off:]) }

// put sets the 8 bytes at off in the slot's buffer.
func (sp *splitter) put(off int, v uint64) { binary.NativeEndian.PutUint64(sp.s.Buf[off:], v) }

// lock CASes the lock bit into the subtable's control word and, in the
// same list (CONDITIONAL on it), writes the client's lease next to it;
// false when another client holds the lock.
func (sp *splitter) lock() (bool, error) {
	c := sp.c
	if err := sp.read(sp.sub, offCtl, 8); err != nil {
		return false, err
	}
	ctl := sp.word(offCtl)
	lease := c.newLease()
	sp.put(offLease, lease)
	for {
		if ctl&ctlLock != 0 {
			return false, nil
		}
		w := []verbs.SendWR{
			{Opcode: verbs.OpAtomicCmpAndSwp, SGL: []verbs.SGE{sp.s.SGE(offCAS, 8)}, RemoteAddr: sp.sub, RKey: c.rkey},
			{Opcode: verbs.OpWrite, Flags: verbs.FlagConditional | verbs.FlagSignaled, SGL: []verbs.SGE{sp.s.SGE(offLease, 8)}, RemoteAddr: sp.sub + leaseOff, RKey: c.rkey},
		}
		w[0].Atomic.Compare[0], w[0].Atomic.Swap[0] = ctl, ctl|ctlLock
		if err := c.do(c.bg, sp.s, w); err != nil {
			return false, err
		}
		got := sp.word(offCAS)
		if got == ctl {
			break
		}
		ctl = got
	}
	sp.ctl, sp.d, sp.suffix = ctl, ctlDepth(ctl), ctlSuffix(ctl)
	sp.lease, sp.beatAt = lease, time.Now()
	return true, nil
}

// drain waits until the writers inside the locked subtable have left, or
// for one lease: a count that is still there then belongs to writers
// presumed dead. A live one that stalled that long cannot harm the split:
// its slot CAS is guarded by the control word (writeGuard) and fails.
func (sp *splitter) drain() error {
	start := time.Now()
	for wait := time.Microsecond; ; wait = min(2*wait, time.Millisecond) {
		if err := sp.read(sp.sub, offCtl, 8); err != nil {
			return err
		}
		if sp.word(offCtl)&ctlCount == 0 {
			return nil
		}
		if time.Since(start) >= sp.c.cfg.Lease {
			slog.Debug("race: a split goes on past writers presumed dead", "subtable", sp.sub, "writers", sp.word(offCtl)&ctlCount)
			return nil
		}
		if err := sp.beat(); err != nil {
			return err
		}
		time.Sleep(wait)
	}
}

// unlock sets the depth and clears the lock by CAS, while the client
// holds its lease: writers that found the subtable locked are still
// leaving (their FETCH_AND_ADD of -1 is on its way), so the count must
// be kept, never overwritten.
func (sp *splitter) unlock(depth uint) error {
	cur := sp.ctl | ctlLock
	for {
		w := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: []verbs.SGE{sp.s.SGE(offCAS, 8)}, RemoteAddr: sp.sub, RKey: sp.c.rkey}
		w.Atomic.Compare[0], w.Atomic.Swap[0] = cur, cur&ctlCount|mkCtl(depth, sp.suffix, false)
		if err := sp.fenced(w); err != nil {
			return err
		}
		got := sp.word(offCAS)
		if got == cur {
			return nil
		}
		cur = got
	}
}

// allocSubtable asks the node for the new subtable's memory.
func (c *Client) allocSubtable(ctx context.Context) (uint64, error) {
	var req [4]byte
	var resp [8]byte
	binary.LittleEndian.PutUint32(req[:], subtableSize)
	c.rpcs.Add(1)
	if _, err := c.rpc.Call(ctx, methodAlloc, req[:], resp[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(resp[:]), nil
}

// classify reads the subtable into the directory buffer and the key of
// each slot's block, the blocks 16 READs to a list: moved marks the
// slots whose key's next hash bit is 1.
func (sp *splitter) classify() ([]bool, error) {
	c := sp.c
	img := c.dirMR.Bytes()[:subtableSize]
	dirSGE := verbs.SGE{Addr: c.dirMR.Addr(), Length: subtableSize, LKey: c.dirMR.LKey()}
	if err := sp.one(verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{dirSGE}, RemoteAddr: sp.sub, RKey: c.rkey}); err != nil {
		return nil, err
	}
	moved := make([]bool, Groups*3*bucketSlots)
	var ws [classifyBatch]verbs.SendWR
	var idx, lens [classifyBatch]int
	k := 0
	flush := func() error {
		if k == 0 {
			return nil
		}
		if err := sp.beat(); err != nil {
			return err
		}
		ws[k-1].Flags |= verbs.FlagSignaled
		if err := c.do(c.bg, sp.s, ws[:k]); err != nil {
			return err
		}
		for j := range k {
			b := sp.s.Buf[offBlock+j*keyStride:]
			kl := int(binary.LittleEndian.Uint16(b))
			if kl == 0 || blockHead+kl > lens[j] {
				continue // cannot be: blocks are written before their slots
			}
			moved[idx[j]] = kv.Hash(b[blockHead:blockHead+kl])>>sp.d&1 == 1
		}
		k = 0
		return nil
	}
	for i := range moved {
		w := binary.NativeEndian.Uint64(img[ctlBytes+8*i:])
		if w == 0 {
			continue
		}
		n := min(slotUnits(w)*blockUnit, blockHead+kv.MaxKey)
		ws[k] = verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{sp.s.SGE(offBlock+k*keyStride, n)}, RemoteAddr: slotAddr(w), RKey: c.rkey}
		idx[k], lens[k] = i, n
		if k++; k == classifyBatch {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return moved, nil
}

// classifyBatch is how many block READs classify puts in one list (a
// smart task's largest list), each into keyStride bytes of the buffer.
const (
	classifyBatch = 16
	keyStride     = (blockHead + kv.MaxKey + 63) &^ 63
)

// copyOut writes the new subtable at nsub: the moved slots of the image
// classify read, at the same positions, under a control word of the next
// depth and the suffix with that bit set — locked, with a lease word of
// the client's, until the old subtable no longer holds the moved keys
// (unlockNew): a writer must not change a moved key while a reader with
// an old directory can still find its old copy.
func (sp *splitter) copyOut(nsub uint64, moved []bool) error {
	img := sp.c.dirMR.Bytes()[:subtableSize]
	out := sp.s.Buf[offNew : offNew+subtableSize]
	clear(out)
	sp.nlease = sp.c.newLease()
	binary.NativeEndian.PutUint64(out, mkCtl(sp.d+1, sp.suffix|1<<sp.d, true))
	binary.NativeEndian.PutUint64(out[leaseOff:], sp.nlease)
	for i, m := range moved {
		if m {
			copy(out[ctlBytes+8*i:ctlBytes+8*i+8], img[ctlBytes+8*i:])
		}
	}
	return sp.one(verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{sp.s.SGE(offNew, subtableSize)}, RemoteAddr: nsub, RKey: sp.c.rkey})
}

// publish points the directory at the two halves (steps 2 and 4) under
// the directory lock: read the global depth and the directory, double it
// when the subtable is at the global depth, repoint and version the
// entries, write them back, and release the lock. Every WRITE runs only
// while the client holds both the subtable's lease and the directory
// lock (dirFenced).
func (sp *splitter) publish(nsub uint64) error {
	c := sp.c
	if err := sp.lockDir(); err != nil {
		return err
	}
	c.hook(hookSplitDirLocked)
	if err := sp.read(c.base, offDepth, 8); err != nil {
		return err
	}
	gd := uint(sp.word(offDepth))
	if gd > MaxDepth || gd < sp.d {
		return fmt.Errorf("%w: global depth %d", kv.ErrUnreachable, gd)
	}
	if err := sp.one(verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{sp.dirSGE(0, 1<<gd)}, RemoteAddr: c.base + dirOff, RKey: c.rkey}); err != nil {
		return err
	}
	if sp.d == gd {
		var err error
		if gd, err = sp.double(gd); err != nil {
			return err
		}
	}
	sp.repoint(gd, nsub)
	if err := sp.dirFenced(verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{sp.dirSGE(0, 1<<gd)}, RemoteAddr: c.base + dirOff, RKey: c.rkey}); err != nil {
		return err
	}
	// The directory lock taken over after the fenced WRITE ran is no
	// failure: the split is published.
	if err := sp.unlockDir(); err != nil && !errors.Is(err, errLease) {
		return err
	}
	return nil
}

// dirSGE describes n directory entries from entry i of the client's
// directory buffer.
func (sp *splitter) dirSGE(i, n int) verbs.SGE {
	return verbs.SGE{Addr: sp.c.dirMR.Addr() + uint64(8*i), Length: uint32(8 * n), LKey: sp.c.dirMR.LKey()}
}

// double doubles the directory of global depth gd: it writes a copy of
// the entries as the upper half, then the raised global depth, and
// returns it.
func (sp *splitter) double(gd uint) (uint, error) {
	c := sp.c
	dirBuf := c.dirMR.Bytes()
	copy(dirBuf[8<<gd:16<<gd], dirBuf[:8<<gd])
	if err := sp.dirFenced(verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{sp.dirSGE(1<<gd, 1<<gd)}, RemoteAddr: c.base + dirOff + 8<<gd, RKey: c.rkey}); err != nil {
		return gd, err
	}
	gd++
	sp.put(offDepth, uint64(gd))
	if err := sp.dirFenced(verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{sp.s.SGE(offDepth, 8)}, RemoteAddr: c.base, RKey: c.rkey}); err != nil {
		return gd, err
	}
	return gd, nil
}

// repoint rewrites, in the directory buffer, the entries that pointed at
// the subtable: those whose next index bit is 1 at nsub, all of them at
// the next depth with their versions bumped.
func (sp *splitter) repoint(gd uint, nsub uint64) {
	dirBuf := sp.c.dirMR.Bytes()
	for i := 0; i < 1<<gd; i++ {
		e := binary.NativeEndian.Uint64(dirBuf[8*i:])
		if dirAddr(e) != sp.sub {
			continue
		}
		target := sp.sub
		if i>>sp.d&1 == 1 {
			target = nsub
		}
		binary.NativeEndian.PutUint64(dirBuf[8*i:], mkDir(target, sp.d+1, dirVersion(e)+1))
	}
}

// clearMoved reads the old subtable again (unchanged since classify: no
// writer ran) and writes its slots back with the moved ones cleared,
// while the client holds its lease.
func (sp *splitter) clearMoved(moved []bool) error {
	if err := sp.read(sp.sub, offNew, subtableSize); err != nil {
		return err
	}
	for i, m := range moved {
		if m {
			clear(sp.s.Buf[offNew+ctlBytes+8*i : offNew+ctlBytes+8*i+8])
		}
	}
	return sp.fenced(verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{sp.s.SGE(offNew+ctlBytes, subtableSize-ctlBytes)}, RemoteAddr: sp.sub + ctlBytes, RKey: sp.c.rkey})
}
