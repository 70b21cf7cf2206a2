package shm

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// publisher keeps a device's node segment tables in step with its nic
// node (nic.Observer) and pushes each region's memfd to the connected
// peers, so they can map it.
type publisher struct {
	seg *nodeSeg
	dep *depSeg

	mu       sync.Mutex
	pds      map[*nic.PD]uint16
	nextPD   uint16
	slots    map[*nic.MR]uint32
	byRKey   atomic.Pointer[map[uint32]*nic.MR] // for lock recovery
	gens     [MRSlots]uint32
	free     []uint32
	next     uint32
	sessions map[*session]struct{}

	qmu sync.Mutex // serialises QP table updates
}

func newPublisher(seg *nodeSeg, dep *depSeg) *publisher {
	p := &publisher{seg: seg, dep: dep, pds: map[*nic.PD]uint16{}, slots: map[*nic.MR]uint32{}, sessions: map[*session]struct{}{}}
	m := map[uint32]*nic.MR{}
	p.byRKey.Store(&m)
	return p
}

// pdID is the small number the tables use for a PD; p.mu or p.qmu held.
func (p *publisher) pdID(pd *nic.PD) uint16 {
	if id, ok := p.pds[pd]; ok {
		return id
	}
	p.nextPD++
	if p.nextPD == 0 {
		p.nextPD = 1
	}
	p.pds[pd] = p.nextPD
	return p.nextPD
}

// RegionAdded implements nic.Observer: the region gets a table slot and
// every connected peer its memfd.
func (p *publisher) RegionAdded(m *nic.MR) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rk := *p.byRKey.Load()
	nm := make(map[uint32]*nic.MR, len(rk)+1)
	for k, v := range rk {
		nm[k] = v
	}
	nm[m.RKey()] = m
	p.byRKey.Store(&nm)
	var slot uint32
	switch {
	case len(p.free) > 0:
		slot = p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
	case p.next < MRSlots:
		slot = p.next
		p.next++
	default:
		return // table full: peers reach this region over the ring only
	}
	p.slots[m] = slot
	p.gens[slot]++
	live := uint64(p.gens[slot])<<1 | 1
	p.qmu.Lock()
	pd := p.pdID(m.PD())
	p.qmu.Unlock()
	p.seg.writeMR(slot, mrInfo{rkey: m.RKey(), pd: uint32(pd), access: uint32(m.Access()), base: m.Addr(), length: uint64(m.Len())}, live)
	m.SetShared(uint64(p.gens[slot])<<32 | uint64(slot+1)) // receives into it may be deposited into (recvarea.go)
	for s := range p.sessions {
		s.pushRegion(slot, live, m.FD())
	}
}

// RegionRemoved implements nic.Observer: the slot is marked dead before
// Deregister goes on, so no peer starts an operation on the region after
// it returns; peers unmap it when the REVOKE arrives.
func (p *publisher) RegionRemoved(m *nic.MR) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rk := *p.byRKey.Load()
	nm := make(map[uint32]*nic.MR, len(rk))
	for k, v := range rk {
		if v != m {
			nm[k] = v
		}
	}
	p.byRKey.Store(&nm)
	slot, ok := p.slots[m]
	if !ok {
		return
	}
	delete(p.slots, m)
	m.SetShared(0)
	live := uint64(p.gens[slot])<<1 | 1
	atomic.StoreUint64(p.seg.mrLive(slot), live&^1)
	p.free = append(p.free, slot)
	for s := range p.sessions {
		s.push(ctlMsg{kind: ctlRevoke, u32: slot, live: live})
	}
}

// QPChanged implements nic.Observer.
func (p *publisher) QPChanged(q *nic.QP) {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	w := packQP(q.QPN(), uint8(q.State()), uint8(q.Access()), p.pdID(q.PD()))
	var peer uint64
	if addr, qpn, ok := q.ConnectedPeer(); ok {
		peer = packPeer(qpn, addrTag(addr))
	}
	atomic.StoreUint64(p.seg.qpPeer(q.QPN()), peer)
	atomic.StoreUint64(p.seg.qpWord(q.QPN()), w)
	// The deposit table: peers deposit SENDs into the QP's receive queue
	// while it is a connected RC QP that receives.
	e0, e1 := p.dep.entry(q.QPN())
	if a, ok := q.RecvAreaOf().(*recvArea); ok && peer != 0 && q.Type() == verbs.RC && q.Receiving() && !a.gone.Load() {
		atomic.StoreUint64(e1, uint64(a.off))
		atomic.StoreUint64(e0, uint64(q.QPN())<<32|uint64(a.gen))
	} else {
		atomic.StoreUint64(e0, 0)
	}
}

// attach starts pushing regions to a new session, beginning with every
// region registered now.
func (p *publisher) attach(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sessions[s] = struct{}{}
	for m, slot := range p.slots {
		s.pushRegion(slot, uint64(p.gens[slot])<<1|1, m.FD())
	}
}

func (p *publisher) detach(s *session) {
	p.mu.Lock()
	delete(p.sessions, s)
	p.mu.Unlock()
}

// resolve returns the device's own bytes at addr under rkey (lock
// recovery), or nil.
func (p *publisher) resolve(rkey uint32, addr, n uint64) []byte {
	m := (*p.byRKey.Load())[rkey]
	if m == nil {
		return nil
	}
	b := m.Bytes()
	if addr < m.Addr() || n > uint64(len(b)) || addr-m.Addr() > uint64(len(b))-n {
		return nil
	}
	off := addr - m.Addr()
	return b[off : off+n]
}

// dupFD duplicates fd for a message that may be sent after the region's
// own fd closed.
func dupFD(fd int) int {
	if fd < 0 {
		return -1
	}
	n, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return n
}

func closeFD(fd int) error { return unix.Close(fd) }
