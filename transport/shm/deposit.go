package shm

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
	"github.com/rdmakit/rdmakit/verbs"
)

var _ nic.Depositor = (*link)(nil)

// depositStall, when set (tests), runs in the middle of a deposit: at
// stage 1 the payload is copied and the completion not yet published, at
// stage 2 the completion is published and the receive not yet consumed.
var depositStall func(stage int)

// Deposit implements nic.Depositor: the SEND goes straight into the
// oldest receive of the device's QP qpn, in this process, under the
// receive queue's lock in the device's deposit segment (depseg.go); the
// device takes the completion up when it next polls. Whatever the device
// would decide differently from a plain delivery — no receive, a receive
// too small or with a buffer not mapped here, a QP not receiving or not
// connected to src, an area full of completions — is left to the ring.
func (l *link) Deposit(src, qpn uint32, op verbs.Opcode, flags verbs.SendFlags, imm uint32, payload [][]byte, length uint64) (verbs.Status, bool) {
	if !l.d.opts.deposit || l.peerDep == nil || l.dead.Load() {
		return 0, false
	}
	ns := l.peerSeg
	w := atomic.LoadUint64(ns.qpWord(qpn))
	if uint32(w>>32) != qpn || !nic.Receiving(verbs.QPState(uint8(w>>24))) ||
		atomic.LoadUint64(ns.qpPeer(qpn)) != packPeer(src, l.selfTag) {
		return 0, false
	}
	e0, e1 := l.peerDep.entry(qpn)
	ent := atomic.LoadUint64(e0)
	off := atomic.LoadUint64(e1)
	if uint32(ent>>32) != qpn || uint32(ent) == 0 || atomic.LoadUint64(e0) != ent {
		return 0, false
	}
	a, c := l.peerDep.area(off)
	if a == nil {
		return 0, false
	}
	lk, err := shmem.LockAt(a[aLock:])
	if err != nil {
		return 0, false
	}
	if !lockDepositor(lk, a, l.me) {
		return 0, false
	}
	ok := l.depositLocked(a, c, uint32(ent), src, qpn, w, op, flags, imm, payload, length)
	_ = lk.UnlockAs(l.me)
	if !ok {
		return 0, false
	}
	// Tell the device: the flag its drain looks at, and its bell if its
	// NIC goroutine sleeps (a load when it does not).
	if p := l.peerDep.pending(); atomic.LoadUint32(p) == 0 {
		atomic.StoreUint32(p, 1)
	}
	ns.ring()
	return verbs.StatusSuccess, true
}

// lockDepositor takes an area's lock for a deposit, repairing the area
// after a dead holder; false when it stays held (the SEND then goes over
// the ring: a device that keeps its own lock cannot stall the poster).
func lockDepositor(lk *shmem.Lock, a []byte, me uint64) bool {
	return lockArea(lk, a, me, 64, 20*time.Millisecond)
}

// lockPatient is the device's own lock of an area: it waits longer
// (lockPatience) before it gives the area up.
func lockPatient(lk *shmem.Lock, a []byte, me uint64) bool {
	return lockArea(lk, a, me, 16, lockPatience)
}

// lockArea takes an area's lock: at once, after up to spins yields, or
// within patience; a holder that died is replaced and the area repaired
// from its journal. It reports false when the lock stayed held.
func lockArea(lk *shmem.Lock, a []byte, me uint64, spins int, patience time.Duration) bool {
	if lk.TryLockAs(me) {
		return true
	}
	for i := 0; i < spins; i++ {
		runtime.Gosched()
		if lk.TryLockAs(me) {
			return true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	err := lk.Lock(ctx)
	cancel()
	switch {
	case err == nil:
		return true
	case errors.Is(err, shmem.ErrOwnerDied):
		repairArea(a)
		return true
	}
	return false
}

// depositLocked does the deposit with the area's lock held; false means
// nothing was changed.
func (l *link) depositLocked(a []byte, c uint64, gen, src, qpn uint32, w uint64, op verbs.Opcode, flags verbs.SendFlags, imm uint32, payload [][]byte, length uint64) bool {
	// Under the lock: the area is still this QP's, and the QP still
	// receives (the device moves it to ERROR before it flushes the queue
	// under this lock).
	if atomic.LoadUint32(u32(a, aGen)) != gen || atomic.LoadUint32(u32(a, aBroken)) != 0 ||
		atomic.LoadUint64(l.peerSeg.qpWord(qpn)) != w {
		return false
	}
	head := atomic.LoadUint64(u64(a, aConsumed))
	tail := atomic.LoadUint64(u64(a, aPosted))
	if head == tail || tail-head > c {
		return false // no receive: the device answers RNR
	}
	d := aHeader + int(head&(c-1))*descSize
	fl := atomic.LoadUint32(u32(a, d))
	nseg := int(fl >> 8)
	if fl&1 == 0 || nseg > depSegs {
		return false
	}
	ct := atomic.LoadUint64(u64(a, aCTail))
	if ct-atomic.LoadUint64(u64(a, aCHead)) >= c {
		return false // the device has not taken the completions up
	}
	var dst [depSegs][]byte
	var capacity uint64
	for i := 0; i < nseg; i++ {
		so := d + 16 + 24*i
		slot := atomic.LoadUint32(u32(a, so))
		n := uint64(atomic.LoadUint32(u32(a, so+4)))
		live := atomic.LoadUint64(u64(a, so+8))
		o := atomic.LoadUint64(u64(a, so+16))
		if slot >= MRSlots {
			return false
		}
		m := l.slots[slot].Load()
		if m == nil || m.live != live || atomic.LoadUint64(l.peerSeg.mrLive(slot)) != live ||
			o > uint64(len(m.Mem)) || n > uint64(len(m.Mem))-o {
			return false // not mapped here (yet), or deregistered: the device decides
		}
		dst[i] = m.Mem[o : o+n : o+n]
		capacity += n
	}
	if capacity < length {
		return false // LOC_LEN_ERR there, REM_INV_REQ_ERR here: the device's call
	}
	atomic.StoreUint64(u64(a, aJHead), head)
	atomic.StoreUint64(u64(a, aJCTail), ct)
	atomic.StoreUint32(u32(a, aJValid), 1)
	nic.CopyLists(dst[:nseg], payload)
	if depositStall != nil {
		depositStall(1)
	}
	co := aHeader + int(c)*descSize + int(ct&(c-1))*compSize
	var cf uint32
	if op == verbs.OpSendWithImm {
		cf |= 1
	}
	if flags&verbs.FlagSolicited != 0 {
		cf |= 2
	}
	atomic.StoreUint64(u64(a, co), atomic.LoadUint64(u64(a, d+8)))
	atomic.StoreUint32(u32(a, co+8), qpn)
	atomic.StoreUint32(u32(a, co+12), src)
	atomic.StoreUint32(u32(a, co+16), uint32(length))
	atomic.StoreUint32(u32(a, co+20), imm)
	atomic.StoreUint32(u32(a, co+24), cf)
	atomic.StoreUint32(u32(a, co+28), l.peerID)
	atomic.StoreUint64(u64(a, aCTail), ct+1)
	if depositStall != nil {
		depositStall(2)
	}
	atomic.StoreUint64(u64(a, aConsumed), head+1)
	atomic.StoreUint32(u32(a, aJValid), 0)
	return true
}
