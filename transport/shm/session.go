package shm

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/internal/wire"
	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/transport/shm/internal/ring"
	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
	"github.com/rdmakit/rdmakit/verbs"
)

// pollBudget bounds the messages one poll of a ring handles, so one busy
// peer cannot starve the others.
const pollBudget = 64

// session is the device side of a connection from a peer: it consumes the
// request ring, executes the requests with the nic (the work a NIC would do
// for two-sided operations and for one-sided ones the peer could not do
// itself) and produces responses. Whoever polls first does the work: an
// application goroutine in CQ.Poll, or the device's NIC goroutine.
type session struct {
	d        *device
	conn     *net.UnixConn
	address  string // the peer device's address
	peerID   uint32
	peer     shmem.ProcessID
	rings    *connRings
	peerSeg  *nodeSeg
	ns       *nic.Session
	maxLen   uint32
	closed   atomic.Bool
	closeErr error

	mu       sync.Mutex // consumer of the request ring, producer of the response ring
	req      nic.Request
	pbuf     [1][]byte
	implicit bool // the request being served is acknowledged implicitly (inflight.go)

	qmu   sync.Mutex // outgoing control messages
	queue []ctlMsg
	wake  chan struct{}
	once  sync.Once
}

// poll serves the requests waiting in the ring, unless another goroutine
// is at it. It reports whether it served any.
func (s *session) poll() bool {
	did := s.pollOnce()
	// A request that came after this goroutine's last look and before it
	// let go found the lock taken by whoever else tried: look again.
	if s.rings.req.Pending() && s.pollOnce() {
		did = true
	}
	return did
}

// pollOnce is one turn of poll.
func (s *session) pollOnce() bool {
	if s.closed.Load() || !s.rings.req.Pending() || !s.mu.TryLock() {
		return false
	}
	defer s.mu.Unlock()
	if s.closed.Load() {
		return false
	}
	did := 0
	rs := s.rings
	for ; did < pollBudget; did++ {
		msg, err := rs.req.Peek()
		if err != nil {
			if err != ring.ErrEmpty {
				go s.close(err)
			}
			break
		}
		if err := wire.DecodeRequest(msg, &s.req, &s.pbuf, s.maxLen); err != nil {
			go s.close(err)
			break
		}
		if !s.req.Datagram {
			need := wire.ResponseHeader + respData(&s.req)
			ok, err := rs.resp.Fits(need)
			if err != nil {
				go s.close(err)
				break
			}
			if !ok {
				// The peer is behind on its responses: leave the request
				// in the ring until it catches up and rings the bell.
				atomic.StoreUint32(rs.blocked, 1)
				if ok, _ = rs.resp.Fits(need); !ok {
					break
				}
			}
		}
		s.implicit = implicitAck(&s.req)
		s.ns.Serve(&s.req, s)
		rs.req.Release()
	}
	if did > 0 {
		s.peerSeg.ring()
	}
	return did > 0
}

// respData is the most data the response to r can carry.
func respData(r *nic.Request) int {
	if r.Opcode.IsAtomic() {
		return 32
	}
	if r.Opcode == verbs.OpAllocate {
		return 8
	}
	if !wire.HasPayload(r.Opcode) {
		return int(r.Length)
	}
	return 0
}

// Respond implements nic.Responder: the response goes into the response
// ring (poll made sure it fits).
func (s *session) Respond(r *nic.Response) {
	if s.implicit && r.Kind == nic.RespAck && r.Status == verbs.StatusSuccess {
		return // the release of the request says it
	}
	n := wire.ResponseLen(r)
	b, err := s.rings.resp.Reserve(n)
	if err != nil {
		go s.close(err)
		return
	}
	wire.AppendResponse(b[:0], r)
	s.rings.resp.Commit()
}

// pushRegion queues a REGION message with a duplicate of the region's fd.
func (s *session) pushRegion(slot uint32, live uint64, fd int) {
	if d := dupFD(fd); d >= 0 {
		s.push(ctlMsg{kind: ctlRegion, u32: slot, live: live, fds: []int{d}})
	}
}

// push queues a control message for the writer goroutine.
func (s *session) push(m ctlMsg) {
	s.qmu.Lock()
	if s.closed.Load() {
		s.qmu.Unlock()
		closeFDs(m.fds)
		return
	}
	s.queue = append(s.queue, m)
	s.qmu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// write sends queued control messages until the session closes.
func (s *session) write() {
	defer s.d.wg.Done()
	for range s.wake {
		s.qmu.Lock()
		q := s.queue
		s.queue = nil
		s.qmu.Unlock()
		for i := range q {
			if !s.closed.Load() {
				if err := sendCtl(s.conn, &q[i]); err != nil {
					go s.close(err)
				}
			}
			closeFDs(q[i].fds)
		}
		if s.closed.Load() {
			return
		}
	}
}

// read watches the control socket: the peer sends nothing after its
// HELLO, so anything but the end of the connection is a protocol error.
func (s *session) read() {
	defer s.d.wg.Done()
	var buf [maxCtl]byte
	_, fds, err := shmem.RecvFDs(s.conn, buf[:], 2)
	closeFDs(fds)
	if err == nil {
		err = ErrProtocol
	}
	s.close(err)
}

// close ends the session: the peer is gone or misbehaved. Its requests
// in the ring are dropped; the nic session forgets it.
func (s *session) close(why error) {
	s.once.Do(func() {
		s.closed.Store(true)
		s.conn.Close()
		s.d.publisher.detach(s)
		s.d.dropSession(s)
		s.d.drainMu.Lock() // no drain is looking at the rings once we have it
		s.mu.Lock()
		s.closeErr = why
		s.ns.Close()
		s.rings.seg.Close()
		s.peerSeg.close()
		s.mu.Unlock()
		s.d.drainMu.Unlock()
		s.qmu.Lock()
		q := s.queue
		s.queue = nil
		s.qmu.Unlock()
		for i := range q {
			closeFDs(q[i].fds)
		}
		close(s.wake)
		if !s.d.closed.Load() {
			slog.Info("shm: peer disconnected", "device", s.d.node.Address(), "peer", s.address, "why", why)
		}
	})
}
