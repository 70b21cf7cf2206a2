package shm

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
	"github.com/rdmakit/rdmakit/verbs"
)

// lockPatience is how long the device waits for an area's lock held by a
// live process before it gives the area up: a deposit holds it for a
// copy, so only a stopped or hostile peer holds it that long. The queue
// then goes on without deposits.
const lockPatience = 2 * time.Second

// recvArea is the device's side of one published receive queue
// (nic.RecvArea) in its deposit segment. Everything it reads back from the
// area — positions, completions, a dead depositor's journal — a peer may
// have scribbled, and is validated.
type recvArea struct {
	d      *device
	a      []byte
	off    int
	cap    uint64
	gen    uint32
	lk     *shmem.Lock
	me     uint64
	chead  uint64 // completions taken: the device's own count, not the area's word
	broken bool   // the completion ring held garbage: Take takes no more (Take's)
	// gone: the area was given up (broken, or its lock never came back):
	// the device takes its lock no more and peers deposit no more. It
	// still reads back, validated, what deposits made before consumed and
	// completed, so none of them is lost.
	gone atomic.Bool
	held bool // this process holds lk (the queue's mutex is held too)
}

var _ nic.RecvArea = (*recvArea)(nil)

// newRecvArea publishes a queue of depth receives (nic.Config.RecvAreas);
// nil when deposits are off or the segment is full (the queue then works
// over the rings only).
func (d *device) newRecvArea(depth, maxSGE int) nic.RecvArea {
	c := 1
	for c < depth {
		c <<= 1
	}
	if c > maxAreaCap {
		return nil
	}
	off, gen := d.dep.alloc(c)
	if off < 0 {
		return nil
	}
	a := d.dep.b[off : off+areaSize(c) : off+areaSize(c)]
	lk, err := shmem.LockAt(a[aLock:])
	if err != nil {
		return nil
	}
	r := &recvArea{d: d, a: a, off: off, cap: uint64(c), gen: gen, lk: lk, me: uint64(shmem.Self())}
	// A late depositor of the area's previous life may hold the lock: it
	// sees the new generation and backs off.
	if !lockPatient(lk, a, r.me) {
		return nil // held by a live process for ever: the area is lost
	}
	for _, o := range []int{aJValid, aBroken} {
		atomic.StoreUint32(u32(a, o), 0)
	}
	for _, o := range []int{aPosted, aConsumed, aCTail, aCHead} {
		atomic.StoreUint64(u64(a, o), 0)
	}
	atomic.StoreUint32(u32(a, aCap), uint32(c))
	atomic.StoreUint32(u32(a, aGen), gen)
	_ = lk.UnlockAs(r.me)
	return r
}

// Lock implements nic.RecvArea.
func (r *recvArea) Lock() {
	if r.gone.Load() {
		return
	}
	if !lockPatient(r.lk, r.a, r.me) {
		if r.giveUp() {
			slog.Warn("shm: a peer holds a receive queue's deposit lock; deposits into it stop", "device", r.d.node.Address(), "holder", r.lk.Owner())
		}
		return
	}
	r.held = true
}

// lockPatient takes an area's lock for the device, repairing the area
// after a dead holder; false when a live process kept it for
// giveUp stops deposits into the area for good; it reports whether this
// call did.
func (r *recvArea) giveUp() bool {
	atomic.StoreUint32(u32(r.a, aBroken), 1)
	atomic.StoreUint32(u32(r.a, aGen), 0)
	return r.gone.CompareAndSwap(false, true)
}

// Unlock implements nic.RecvArea.
func (r *recvArea) Unlock() {
	if r.held {
		r.held = false
		_ = r.lk.UnlockAs(r.me)
	}
}

// Consumed implements nic.RecvArea.
func (r *recvArea) Consumed(head, tail uint64) uint64 {
	c := atomic.LoadUint64(u64(r.a, aConsumed))
	if c < head || c > tail {
		if r.giveUp() {
			slog.Warn("shm: garbage in a receive queue's deposit area; deposits into it stop", "device", r.d.node.Address(), "consumed", c, "head", head, "tail", tail)
		}
		return head
	}
	return c
}

// SetConsumed implements nic.RecvArea.
func (r *recvArea) SetConsumed(pos uint64) { atomic.StoreUint64(u64(r.a, aConsumed), pos) }

// Post implements nic.RecvArea.
func (r *recvArea) Post(pos uint64, id uint64, segs []nic.RecvSeg) {
	o := aHeader + int(pos&(r.cap-1))*descSize
	var flags uint32
	if segs != nil && len(segs) <= depSegs {
		flags = 1 | uint32(len(segs))<<8
		for i := range segs {
			v := segs[i].MR.Shared()
			if v == 0 {
				flags = 0
				break
			}
			so := o + 16 + 24*i
			atomic.StoreUint32(u32(r.a, so), uint32(v)-1)
			atomic.StoreUint32(u32(r.a, so+4), segs[i].Length)
			atomic.StoreUint64(u64(r.a, so+8), v>>32<<1|1)
			atomic.StoreUint64(u64(r.a, so+16), segs[i].Offset)
		}
	}
	atomic.StoreUint64(u64(r.a, o+8), id)
	atomic.StoreUint32(u32(r.a, o), flags)
}

// SetPosted implements nic.RecvArea.
func (r *recvArea) SetPosted(tail uint64) { atomic.StoreUint64(u64(r.a, aPosted), tail) }

// Take implements nic.RecvArea.
func (r *recvArea) Take(dp *nic.Deposited) bool {
	t := atomic.LoadUint64(u64(r.a, aCTail))
	if t == r.chead || r.broken {
		return false
	}
	if t-r.chead > r.cap {
		// Garbage: nothing in the ring can be trusted any more.
		r.broken = true
		if r.giveUp() {
			slog.Warn("shm: garbage in a receive queue's completion area; deposits into it stop", "device", r.d.node.Address(), "tail", t, "head", r.chead)
		}
		return false
	}
	o := aHeader + int(r.cap)*descSize + int(r.chead&(r.cap-1))*compSize
	*dp = nic.Deposited{
		ID:      atomic.LoadUint64(u64(r.a, o)),
		QPN:     atomic.LoadUint32(u32(r.a, o+8)),
		SrcQPN:  atomic.LoadUint32(u32(r.a, o+12)),
		ByteLen: atomic.LoadUint32(u32(r.a, o+16)),
		Imm:     atomic.LoadUint32(u32(r.a, o+20)),
		SrcID:   atomic.LoadUint32(u32(r.a, o+28)),
	}
	f := atomic.LoadUint32(u32(r.a, o+24))
	if f&1 != 0 {
		dp.Flags |= verbs.WCWithImm
	}
	if f&2 != 0 {
		dp.Flags |= verbs.WCSolicited
	}
	r.chead++
	atomic.StoreUint64(u64(r.a, aCHead), r.chead)
	return true
}

// Close implements nic.RecvArea: the generation goes to 0 under the lock,
// so no deposit starts after it, and the memory returns to the allocator.
// An area given up, or whose lock a live peer keeps, is not reused.
func (r *recvArea) Close() {
	if r.gone.Load() || !lockPatient(r.lk, r.a, r.me) {
		return
	}
	atomic.StoreUint32(u32(r.a, aGen), 0)
	_ = r.lk.UnlockAs(r.me)
	r.d.dep.release(r.off, int(r.cap))
}
