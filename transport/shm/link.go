package shm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/internal/wire"
	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/transport/shm/internal/ring"
	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
	"github.com/rdmakit/rdmakit/verbs"
)

// errLinkDead is what Append and Flush return once a link failed.
var errLinkDead = errors.New("shm: link down")

// link is the requester side of a connection to another device
// (nic.DirectLink): one-sided operations run directly on the peer's
// regions, mapped here; everything else is a request in the request ring,
// answered in the response ring.
type link struct {
	d       *device
	address string
	conn    *net.UnixConn // nil for a link to an unreachable device
	peer    shmem.ProcessID
	selfTag uint32 // addrTag of this device's address
	rings   *connRings
	peerSeg *nodeSeg
	peerDep *depSeg // the device's deposit segment (deposit.go)
	peerID  uint32  // this device's number at the peer (WC.SrcID of its receives)
	me      uint64  // shmem.Self()
	locks   *sharedLocks

	maps  atomic.Pointer[map[uint32]*mapping] // by rkey
	cache [64]atomic.Pointer[mapping]         // by rkey mod 64: the last used
	slots [MRSlots]atomic.Pointer[mapping]    // by region table slot (deposits)
	mmu   sync.Mutex                          // map updates

	use      sync.RWMutex // held shared outside the QP locks to use the rings or the peer's segment; fail takes it before it unmaps them
	pmu      sync.Mutex   // producer of the request ring
	full     atomic.Bool  // Append found the ring full: Flush waits for room
	fullNeed int

	cmu      sync.Mutex // consumer of the response ring
	resp     nic.Response
	inflight inflightQueue
	ackedTo  atomic.Uint64 // ring position up to which requests are completed
	// ringsGone: fail unmapped the rings (set under use, which readers
	// outside the hot path hold).
	ringsGone bool
	tracking  atomic.Bool // Append found the in-flight queue full

	recvd   atomic.Uint64 // response batches taken: progress, for Progressed
	pmuSeen sync.Mutex    // guards seen, seenAt and the grace (Progressed's slow path)
	seen    uint64
	seenAt  time.Time
	// The grace (Progressed): a link first found silent for a retry
	// budget gets one budget more, renewed only by a response batch.
	grace   nic.SilenceGrace
	dead    atomic.Bool
	deadErr error
	ctx     context.Context
	cancel  context.CancelFunc
	once    sync.Once
}

// mapping is one of the peer's regions as this process maps it.
type mapping struct {
	slot       uint32
	live       uint64
	rkey       uint32
	nic.Region // bytes as mapped here, the peer's address of them, PD and access: what nic.Resolve checks
	seg        *shmem.Segment
}

var _ nic.DirectLink = (*link)(nil)

// afterPublish, when set (by a test), runs in Append right after a
// request is published on the ring.
var afterPublish atomic.Pointer[func(*link)]

// afterEmptyLook, when set (by a test), runs in a poll that found
// nothing in flight, before it looks at the response ring.
var afterEmptyLook atomic.Pointer[func(*link)]

// Address implements nic.Link.
func (l *link) Address() string { return l.address }

// Append implements nic.Link: the request goes into the request ring.
func (l *link) Append(r *nic.Request) error {
	n := wire.RequestLen(r)
	l.pmu.Lock()
	if l.dead.Load() {
		l.pmu.Unlock()
		return errLinkDead
	}
	if !r.Datagram && l.inflight.full() {
		l.tracking.Store(true)
		l.pmu.Unlock()
		return nic.ErrLinkFull
	}
	b, err := l.rings.req.Reserve(n)
	if err != nil {
		full := errors.Is(err, ring.ErrFull)
		if full {
			l.full.Store(true)
			l.fullNeed = n
		}
		l.pmu.Unlock()
		if full {
			return nic.ErrLinkFull
		}
		go l.fail(err)
		return err
	}
	wire.AppendRequest(b[:0], r)
	if !r.Datagram {
		// Tracked before it is published: the device may answer it at
		// once, and a poll that found the answer with nothing in flight
		// would take the link down ("an answer to no request": kv-peers
		// lost a node's link to a client that way, its Append preempted
		// between the two).
		l.inflight.push(inflight{end: l.rings.req.CommitEnd(), qpn: r.SrcQPN, epoch: r.Epoch, seq: r.Seq, implicit: implicitAck(r)})
	}
	l.rings.req.Commit()
	if h := afterPublish.Load(); h != nil {
		(*h)(l)
	}
	l.pmu.Unlock()
	return nil
}

// Flush implements nic.Link: it rings the peer's bell (one doorbell per
// post list) and, when the ring was full, waits for room.
func (l *link) Flush() error {
	l.use.RLock()
	defer l.use.RUnlock()
	if l.dead.Load() {
		return errLinkDead
	}
	l.peerSeg.ring()
	for i := 0; l.tracking.Load() && !l.dead.Load(); i++ {
		// Too many requests in flight: complete some before more go out.
		if l.poll() {
			l.tracking.Store(false)
			break
		}
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
	if !l.full.Load() {
		return nil
	}
	l.pmu.Lock()
	defer l.pmu.Unlock()
	if !l.full.Load() || l.dead.Load() {
		return nil
	}
	l.full.Store(false)
	err := l.rings.req.WaitSpace(l.ctx, l.fullNeed, l.d.opts.spin, nil)
	if err != nil && !l.dead.Load() {
		go l.fail(err)
	}
	return err
}

// Progressed implements nic.Link. The hot path only counts response
// batches (a clock read costs more than a small message here); the time
// of the last change is taken when Progressed notices it, at most one
// expiry tick late. On a loaded machine either process can be starved of
// CPU for longer than a retry budget, so silence alone is not death: an
// answer waiting in the ring (this process was slow to take it) is
// progress, and a link first found silent for d gets d more of grace,
// renewed only by a response batch taken. A stopped device is detected
// after twice the budget.
func (l *link) Progressed(d time.Duration) bool {
	l.pmuSeen.Lock()
	defer l.pmuSeen.Unlock()
	now := time.Now()
	if c := l.recvd.Load(); c != l.seen {
		l.seen, l.seenAt = c, now
	}
	if now.Sub(l.seenAt) < d {
		return true
	}
	if l.conn != nil && l.use.TryRLock() { // never waits under the QP lock; failing to get it proves nothing
		waiting := !l.dead.Load() && l.ready()
		l.use.RUnlock()
		if waiting {
			return true
		}
	}
	return l.grace.Alive(now, d, l.seen)
}

// poll completes the requests the device has answered or, for the
// implicitly acknowledged ones, consumed (see inflight.go), unless another
// goroutine is at it, and reports whether it completed any.
func (l *link) poll() bool {
	did := l.pollOnce()
	// An answer that came after the last look of the goroutine at it and
	// before it let go found the lock taken by whoever else tried (the
	// NIC goroutine's drain, another poller): look again, or it waits for
	// the next poll that finds its CQ empty.
	if l.conn != nil && !l.dead.Load() && l.rings.resp.Pending() && l.pollOnce() {
		did = true
	}
	return did
}

// pollOnce is one turn of poll.
func (l *link) pollOnce() bool {
	if l.conn == nil || l.dead.Load() || !l.ready() || !l.cmu.TryLock() {
		return false
	}
	defer l.cmu.Unlock()
	if l.dead.Load() {
		return false
	}
	n := 0
	rel := l.rings.req.Released()
	for n < pollBudget {
		e := l.inflight.front()
		if e == nil {
			if h := afterEmptyLook.Load(); h != nil {
				(*h)(l)
			}
			// An answer with nothing in flight is a lie only if it was
			// there before we looked at the queue: a request appended
			// (and tracked before it was published) after front found
			// the queue empty can be answered before Pending is read —
			// a poller preempted between the two took prism-tx's link
			// down that way. So look at the ring first, then at the
			// queue again.
			if l.rings.resp.Pending() && l.inflight.front() == nil {
				go l.fail(fmt.Errorf("%w: an answer to no request", ErrProtocol))
				break
			}
			if l.inflight.front() == nil {
				break
			}
			continue
		}
		msg, err := l.rings.resp.Peek()
		if err == nil {
			if err := wire.DecodeResponse(msg, &l.resp); err != nil {
				go l.fail(err)
				break
			}
			if l.resp.SrcQPN == e.qpn && l.resp.Epoch == e.epoch && l.resp.Seq == e.seq {
				l.d.node.HandleResponse(l, &l.resp)
				l.rings.resp.Release()
				l.complete(e)
				n++
				continue
			}
			// The answer is for a later request, so e was served and
			// left unanswered: a success needing none, or a request the
			// device discarded.
			if rel < e.end {
				rel = l.rings.req.Released()
			}
			if rel < e.end {
				go l.fail(fmt.Errorf("%w: answer for QP %d seq %d, expected seq %d", ErrProtocol, l.resp.SrcQPN, l.resp.Seq, e.seq))
				break
			}
		} else {
			if err != ring.ErrEmpty {
				go l.fail(err)
				break
			}
			if rel < e.end {
				if rel = l.rings.req.Released(); rel < e.end {
					break // not served yet
				}
				// Served: an answer, if any, was committed before the
				// release we just saw; look again.
				continue
			}
		}
		// e was served and left unanswered.
		if !e.implicit {
			// A READ or atomic the device discarded (a later request of
			// a QP that was answered an error or an RNR, or of an older
			// connection): retired, and the QP hears nothing, as over
			// tcp — it has already failed, or will send the request
			// again. Waiting for an answer that never comes would hold
			// up every later request on the link.
			l.complete(e)
			n++
			continue
		}
		// A success that needs no answer (SEND, WRITE): acknowledged by
		// the ring's release.
		l.resp = nic.Response{Kind: nic.RespAck, Status: verbs.StatusSuccess, SrcQPN: e.qpn, Epoch: e.epoch, Seq: e.seq}
		l.d.node.HandleResponse(l, &l.resp)
		l.complete(e)
		n++
	}
	if n > 0 {
		l.recvd.Add(1)
		if b := l.rings.blocked; atomic.LoadUint32(b) != 0 && atomic.SwapUint32(b, 0) != 0 {
			l.peerSeg.ring()
		}
	}
	return n > 0
}

// complete retires the front in-flight request e.
func (l *link) complete(e *inflight) {
	l.ackedTo.Store(e.end)
	l.inflight.pop()
}

// ready reports, without locks, whether poll may have work: an answer in
// the ring, or requests the device released beyond those completed.
func (l *link) ready() bool {
	if l.rings.resp.Pending() {
		return true
	}
	return l.inflight.tail.Load() != l.inflight.head.Load() && l.rings.req.Released() > l.ackedTo.Load()
}

// Remote implements nic.DirectLink.
func (l *link) Remote(src, qpn, rkey uint32, addr, n uint64, need verbs.Access) ([]byte, verbs.Status, bool) {
	if l.dead.Load() {
		return nil, 0, false // Append fails it
	}
	if addr >= verbs.ScratchBase {
		return nil, 0, false // the responder QP's scratch area is not mapped here
	}
	w := atomic.LoadUint64(l.peerSeg.qpWord(qpn))
	if uint32(w>>32) != qpn || atomic.LoadUint64(l.peerSeg.qpPeer(qpn)) != packPeer(src, l.selfTag) ||
		atomic.LoadUint64(l.peerSeg.qpWord(qpn)) != w {
		// Unknown here, not connected to src, or the slot changed while
		// read (the device writes the peer word, then the QP word): the
		// device decides.
		return nil, 0, false
	}
	if !nic.Receiving(verbs.QPState(uint8(w >> 24))) {
		return nil, verbs.StatusRetryExcErr, true
	}
	m := l.mapped(rkey)
	if m == nil {
		return nil, 0, false // not mapped (yet): the device decides
	}
	r := &m.Region
	if atomic.LoadUint64(l.peerSeg.mrLive(m.slot)) != m.live {
		r = nil // deregistered: the rkey names no region any more
	}
	// The device's rules, applied to the device's QP word and region entry.
	b, st := nic.Resolve(r, uint32(uint16(w)), verbs.Access(uint8(w>>16)), addr, n, need)
	return b, st, true
}

// mapped returns the mapping of the peer's region rkey, or nil.
func (l *link) mapped(rkey uint32) *mapping {
	c := &l.cache[rkey%uint32(len(l.cache))]
	m := c.Load()
	if m == nil || m.rkey != rkey {
		if m = (*l.maps.Load())[rkey]; m == nil {
			return nil
		}
		c.Store(m) // a revoked mapping cached late still fails the live check
	}
	return m
}

// Grant implements nic.DirectLink: what Remote checks on every request,
// checked once, with the words that keep it true. Every mapping and the
// peer's node segment are unmapped only after Node.Quiesce(l), which
// drops the Grants.
func (l *link) Grant(src, qpn, rkey uint32, g *nic.Grant) bool {
	if l.dead.Load() {
		return false
	}
	state, peer := l.peerSeg.qpWord(qpn), l.peerSeg.qpPeer(qpn)
	w := atomic.LoadUint64(state)
	if uint32(w>>32) != qpn || atomic.LoadUint64(peer) != packPeer(src, l.selfTag) ||
		atomic.LoadUint64(state) != w || !nic.Receiving(verbs.QPState(uint8(w>>24))) {
		return false
	}
	m := l.mapped(rkey)
	if m == nil {
		return false
	}
	live := l.peerSeg.mrLive(m.slot)
	if atomic.LoadUint64(live) != m.live {
		return false
	}
	*g = nic.Grant{RKey: rkey, Region: m.Region, PD: uint32(uint16(w)), Access: verbs.Access(uint8(w >> 16)),
		State: state, Peer: peer, Live: live, StateWant: w, PeerWant: packPeer(src, l.selfTag), LiveWant: m.live}
	return true
}

// Locks implements nic.DirectLink.
func (l *link) Locks() nic.AtomicLocks { return l.locks }

// Enter implements nic.DirectLink: the connection's active word turns
// odd for the device's Quiesce. A dead link's rings may be unmapped
// (Remote then fails the operation); a link that dies between Enter and
// Exit keeps them mapped until the caller's QP lock is released.
func (l *link) Enter() {
	if !l.dead.Load() {
		atomic.AddUint64(l.rings.active, 1)
	}
}

// Exit implements nic.DirectLink.
func (l *link) Exit() {
	if !l.dead.Load() {
		atomic.AddUint64(l.rings.active, 1)
	}
}

// resolve returns the peer's bytes at addr under rkey as mapped here (lock
// recovery), or nil.
func (l *link) resolve(rkey uint32, addr, n uint64) []byte {
	m := (*l.maps.Load())[rkey]
	if m == nil {
		return nil
	}
	b, _ := m.Slice(addr, n)
	return b
}

// readControl handles the device's REGION and REVOKE messages until the
// connection ends, which fails the link: the device is gone.
func (l *link) readControl() {
	defer l.d.wg.Done()
	for {
		m, err := recvCtl(l.conn)
		if err != nil {
			l.fail(fmt.Errorf("peer %s: %w", l.address, err))
			return
		}
		switch m.kind {
		case ctlRegion:
			l.addRegion(&m)
		case ctlRevoke:
			l.revoke(m.u32, m.live)
		default:
			closeFDs(m.fds)
			l.fail(fmt.Errorf("%w: unexpected control kind %d", ErrProtocol, m.kind))
			return
		}
	}
}

// addRegion maps a region the device published.
func (l *link) addRegion(m *ctlMsg) {
	defer closeFDs(m.fds)
	l.use.RLock() // the peer's node segment stays mapped meanwhile
	if l.dead.Load() || atomic.LoadUint64(l.peerSeg.mrLive(m.u32)) != m.live {
		l.use.RUnlock()
		return // the link failed, or the region is already revoked
	}
	info := l.peerSeg.readMR(m.u32)
	l.use.RUnlock()
	seg, err := shmem.Open(m.fds[0], 0)
	if err != nil {
		return
	}
	if !seg.Sealed() || info.length == 0 || info.length > uint64(seg.Size()) || info.base+info.length < info.base {
		seg.Close() // unsafe or inconsistent: leave the region to the ring path
		return
	}
	mp := &mapping{slot: m.u32, live: m.live, rkey: info.rkey, seg: seg,
		Region: nic.Region{PD: info.pd, Access: verbs.Access(info.access), Base: info.base, Mem: seg.Bytes()[:info.length:info.length]}}
	l.mmu.Lock()
	if l.dead.Load() {
		l.mmu.Unlock()
		seg.Close()
		return
	}
	old := *l.maps.Load()
	nm := make(map[uint32]*mapping, len(old)+1)
	for k, v := range old {
		nm[k] = v
	}
	stale := nm[mp.rkey]
	nm[mp.rkey] = mp
	l.maps.Store(&nm)
	l.uncache(stale)
	l.slots[mp.slot].Store(mp)
	if stale != nil && stale.slot != mp.slot {
		l.slots[stale.slot].CompareAndSwap(stale, nil)
	}
	l.mmu.Unlock()
	if stale != nil {
		l.d.node.Quiesce(l)
		stale.seg.Close()
	}
}

// revoke unmaps a region the device deregistered, once no operation on it
// is running here.
func (l *link) revoke(slot uint32, live uint64) {
	l.mmu.Lock()
	old := *l.maps.Load()
	var gone *mapping
	nm := make(map[uint32]*mapping, len(old))
	for k, v := range old {
		if v.slot == slot && v.live == live {
			gone = v
			continue
		}
		nm[k] = v
	}
	l.maps.Store(&nm)
	l.uncache(gone)
	if gone != nil {
		l.slots[slot].CompareAndSwap(gone, nil)
	}
	l.mmu.Unlock()
	if gone != nil {
		l.d.node.Quiesce(l)
		gone.seg.Close()
	}
}

// uncache drops m from the lookup cache (l.mmu held): after the caller
// quiesces the node's QPs, no operation can still find it.
func (l *link) uncache(m *mapping) {
	if m != nil {
		l.cache[m.rkey%uint32(len(l.cache))].CompareAndSwap(m, nil)
	}
}

// Dead reports whether the link failed (nic.DialedLink).
func (l *link) Dead() bool { return l.dead.Load() }

// fail takes the link down: its QPs fail (RETRY_EXC_ERR, then ERROR) and
// its mappings and rings are released once nothing uses them.
func (l *link) fail(err error) {
	l.once.Do(func() {
		l.dead.Store(true)
		l.deadErr = err
		slog.Info("shm: link failed", "device", l.d.node.Address(), "peer", l.address, "err", err)
		if l.cancel != nil {
			l.cancel()
		}
		l.d.forget(l)
		l.d.node.LinkDown(l)
		if l.conn == nil {
			return
		}
		l.conn.Close()
		l.mmu.Lock()
		old := *l.maps.Load()
		empty := map[uint32]*mapping{}
		l.maps.Store(&empty)
		for i := range l.cache {
			l.cache[i].Store(nil)
		}
		for i := range l.slots {
			l.slots[i].Store(nil)
		}
		l.mmu.Unlock()
		l.d.node.Quiesce(l)
		for _, m := range old {
			m.seg.Close()
		}
		// The QPs are out of the direct path (Quiesce), Flush out of the
		// rings and the peer's bell (use), Append (pmu) and the drains
		// (drainMu) too: the rings and the peer's node segment can go.
		l.use.Lock()
		l.pmu.Lock()
		l.d.drainMu.Lock()
		l.ringsGone = true
		l.rings.seg.Close()
		l.peerSeg.close()
		l.peerDep.close()
		l.d.drainMu.Unlock()
		l.pmu.Unlock()
		l.use.Unlock()
	})
}

// closedRings reports whether the link has no rings to look at: never
// connected, or unmapped by fail. The caller holds use.
func (l *link) closedRings() bool { return l.conn == nil || l.ringsGone }

// DebugState describes the link for nic.DumpQPs: its response batches,
// when Progressed last saw them move, what is in flight and whether an
// answer waits.
func (l *link) DebugState() string {
	l.pmuSeen.Lock()
	seen, at := l.seen, l.seenAt
	l.pmuSeen.Unlock()
	// The rings stay mapped while use is held; a closed link's are gone.
	// The dump holds the QP's lock: never wait for use under it.
	if !l.use.TryRLock() {
		return fmt.Sprintf("recvd %d (seen %d, %v ago), rings busy (being closed?)", l.recvd.Load(), seen, time.Since(at).Round(time.Millisecond))
	}
	defer l.use.RUnlock()
	if l.closedRings() {
		return fmt.Sprintf("recvd %d (seen %d, %v ago), closed", l.recvd.Load(), seen, time.Since(at).Round(time.Millisecond))
	}
	return fmt.Sprintf("recvd %d (seen %d, %v ago), in flight %d, acked to %d, released %d, answer waiting %v, ready %v, dead %v",
		l.recvd.Load(), seen, time.Since(at).Round(time.Millisecond), l.inflight.tail.Load()-l.inflight.head.Load(),
		l.ackedTo.Load(), l.rings.req.Released(), l.rings.resp.Pending(), l.ready(), l.dead.Load())
}
