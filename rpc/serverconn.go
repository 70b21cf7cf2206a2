package rpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmakit/rdmakit/verbs"
)

// ServerConn is one connection of a Server, its receives posted (Attach).
// Its completions are routed by kind, each kind a tag of the
// connection's router: the request receives, the SENDs answering them,
// and the SENDs answering HERD requests.
type ServerConn struct {
	s      *Server
	ctx    context.Context // Serve's
	closed bool
	pd     verbs.PD
	qp     verbs.QP
	mr     verbs.MR // n receive buffers, then n response buffers
	n      int
	size   int
	// A request's receive is posted again (recvs[i]) as soon as the
	// request is handled: its answer is built in a response buffer of
	// its own (free), held until the answer's SEND completes. A request
	// that finds every response buffer held (answers the peer has not
	// acknowledged yet) waits in pending, its receive not yet reposted,
	// until one completes. So the receives a client finds posted do not
	// depend on how fast its acknowledgements come back.
	recvs   []verbs.RecvWR
	free    []int // response buffers not held by an answer in flight
	pending []pendingRequest
	sends   []verbs.SendWR // the responses of one poll, posted as one list
	sgl     []verbs.SGE
	herd    *herdRegion // once the client opened HERD requests

	router                    verbs.Router
	recvTag, sendTag, herdTag verbs.Tag
}

// pendingRequest is a received request waiting for a response buffer.
type pendingRequest struct {
	slot int    // its receive
	n    uint32 // its bytes
}

// errStopped: a completion flushed because Serve's context ended.
var errStopped = errors.New("rpc: serving stopped")

// newConn registers the connection's buffers and posts its receives.
func (s *Server) newConn(pd verbs.PD, qp verbs.QP) (*ServerConn, error) {
	n, size := s.cfg.Recvs, s.cfg.MaxMessage
	mr, err := pd.AllocMR(2*n*size, verbs.AccessLocalWrite)
	if err != nil {
		return nil, err
	}
	c := &ServerConn{s: s, ctx: context.Background(), pd: pd, qp: qp, mr: mr, n: n, size: size,
		recvs: make([]verbs.RecvWR, n), sends: make([]verbs.SendWR, 0, n), sgl: make([]verbs.SGE, n),
		free: make([]int, n), pending: make([]pendingRequest, 0, n)}
	for i := range c.free {
		c.free[i] = n - 1 - i
	}
	for _, r := range []struct {
		tag *verbs.Tag
		h   verbs.CompletionHandler
	}{{&c.recvTag, c.request}, {&c.sendTag, c.answered}, {&c.herdTag, c.herdAnswered}} {
		if *r.tag, err = c.router.Register(r.h); err != nil {
			mr.Deregister()
			return nil, err
		}
	}
	for i := range c.recvs {
		sge := verbs.SGE{Addr: mr.Addr() + uint64(i*size), Length: uint32(size), LKey: mr.LKey()}
		c.recvs[i] = verbs.RecvWR{ID: c.recvTag.ID(uint64(i)), SGL: []verbs.SGE{sge}}
	}
	if err := qp.PostRecv(c.recvs); err != nil {
		mr.Deregister()
		return nil, err
	}
	return c, nil
}

// Close releases the buffers of a connection that is not served (Serve
// releases them when it returns); the receives still posted must not
// complete afterwards, so destroy or reset the QP first, or never connect
// it. Close is idempotent; do not call it while Serve runs.
func (c *ServerConn) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	if c.herd != nil {
		c.herd.close()
	}
	return c.mr.Deregister()
}

// check turns an error completion into the connection's failure, or into
// errStopped for a flush after Serve's context ended.
func (c *ServerConn) check(w *verbs.WC) error {
	if w.Status == verbs.StatusSuccess {
		return nil
	}
	if w.Status == verbs.StatusWRFlushErr && c.ctx.Err() != nil {
		return errStopped
	}
	return fmt.Errorf("rpc: server connection: %v: %w", w.Opcode, w.Status.Err())
}

// request handles the request in a receive and queues its response.
func (c *ServerConn) request(w *verbs.WC) error {
	if err := c.check(w); err != nil {
		return err
	}
	slot := int(w.ID & verbs.LowMask)
	if w.Opcode != verbs.WCRecv || slot >= c.n {
		return nil
	}
	if len(c.free) == 0 {
		c.pending = append(c.pending, pendingRequest{slot, w.ByteLen})
		return nil
	}
	return c.answer(slot, w.ByteLen)
}

// answer handles the request of n bytes in receive slot with a free
// response buffer, posts the receive again and queues the response.
func (c *ServerConn) answer(slot int, n uint32) error {
	b := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	buf := c.mr.Bytes()
	req := buf[slot*c.size : slot*c.size+int(n)]
	out := buf[(c.n+b)*c.size : (c.n+b+1)*c.size]
	var m int
	if method, _, id, ok := parseHeader(req); ok && method == MethodHerdOpen {
		m = c.s.open(c.pd, c.herd == nil, &c.herd, method, id, req[Header:], out)
	} else {
		m = c.s.handle(req, out)
	}
	// The request is consumed (its answer, if any, is in out).
	if err := c.qp.PostRecv(c.recvs[slot : slot+1]); err != nil {
		return err
	}
	if m == 0 { // malformed: dropped
		c.free = append(c.free, b)
		return nil
	}
	c.sgl[b] = verbs.SGE{Addr: c.mr.Addr() + uint64((c.n+b)*c.size), Length: uint32(m), LKey: c.mr.LKey()}
	c.sends = append(c.sends, verbs.SendWR{ID: c.sendTag.ID(uint64(b)), Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
		SGL: c.sgl[b : b+1]})
	return nil
}

// answered frees a response buffer once the SEND of its response is
// done, and answers the oldest request waiting for one.
func (c *ServerConn) answered(w *verbs.WC) error {
	if err := c.check(w); err != nil {
		return err
	}
	b := int(w.ID & verbs.LowMask)
	if b >= c.n {
		return nil
	}
	c.free = append(c.free, b)
	if len(c.pending) == 0 {
		return nil
	}
	p := c.pending[0]
	copy(c.pending, c.pending[1:])
	c.pending = c.pending[:len(c.pending)-1]
	return c.answer(p.slot, p.n)
}

// herdAnswered frees a HERD request slot once the SEND of its response is
// done.
func (c *ServerConn) herdAnswered(w *verbs.WC) error {
	if err := c.check(w); err != nil {
		return err
	}
	if slot := int(w.ID & verbs.LowMask); c.herd != nil && slot < len(c.herd.busy) {
		c.herd.busy[slot] = false
	}
	return nil
}
