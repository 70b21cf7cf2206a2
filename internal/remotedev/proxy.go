package remotedev

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/rdmakit/rdmakit/verbs"
)

// device is the proxy of a device in the server process.
type device struct {
	c    *Client
	h    uint64
	addr string
	id   uint32
	attr verbs.DeviceAttr

	mu     sync.Mutex
	closed bool
	mrs    map[*mr]struct{} // mapped regions, unmapped at Close
}

var _ verbs.Device = (*device)(nil)

func (d *device) Address() string        { return d.addr }
func (d *device) ID() uint32             { return d.id }
func (d *device) Attr() verbs.DeviceAttr { return d.attr }

func (d *device) AllocPD() (verbs.PD, error) {
	resp, err := d.c.do(request{Op: opDevAllocPD, Target: d.h})
	if err != nil {
		return nil, err
	}
	return &pd{d: d, h: resp.Handle}, nil
}

func (d *device) CreateCQ(depth int) (verbs.CQ, error) {
	resp, err := d.c.do(request{Op: opDevCreateCQ, Target: d.h, N: depth})
	if err != nil {
		return nil, err
	}
	return &cq{c: d.c, h: resp.Handle, depth: resp.N}, nil
}

// Close closes the server's device and unmaps the proxy's memory regions,
// as closing a local device unmaps its regions.
func (d *device) Close() error {
	_, err := d.c.do(request{Op: opDevClose, Target: d.h})
	d.mu.Lock()
	d.closed = true
	mrs := d.mrs
	d.mrs = map[*mr]struct{}{}
	d.mu.Unlock()
	for m := range mrs {
		if m.gone.CompareAndSwap(false, true) {
			m.unmap()
		}
	}
	return err
}

// pd is the proxy of a protection domain.
type pd struct {
	d *device
	h uint64
}

var _ verbs.PD = (*pd)(nil)

func (p *pd) AllocMR(size int, access verbs.Access) (verbs.MR, error) {
	cl := p.d.c.start(&request{Op: opPDAllocMR, Target: p.h, N: size, Access: access})
	<-cl.done
	resp, err := cl.result()
	if err != nil {
		closeFDs(cl.fds)
		return nil, err
	}
	if len(cl.fds) != 1 {
		closeFDs(cl.fds)
		return nil, fmt.Errorf("remotedev: AllocMR answered with %d descriptors, want 1", len(cl.fds))
	}
	fd := cl.fds[0]
	page := unix.Getpagesize()
	mapped := (resp.N + page - 1) / page * page
	buf, merr := unix.Mmap(fd, 0, mapped, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fd)
	m := &mr{c: p.d.c, d: p.d, h: resp.Handle, n: resp.N, addr: resp.Addr, lkey: resp.ID32, rkey: resp.Key, access: resp.Access}
	if merr != nil {
		p.d.c.do(request{Op: opMRDeregister, Target: m.h})
		return nil, fmt.Errorf("%w: remotedev: mmap the region's memfd: %v", verbs.ErrNoMemory, merr)
	}
	m.buf = buf[:resp.N:mapped]
	p.d.mu.Lock()
	if p.d.closed {
		p.d.mu.Unlock()
		m.unmap()
		return nil, verbs.ErrClosed
	}
	p.d.mrs[m] = struct{}{}
	p.d.mu.Unlock()
	return m, nil
}

// handle returns the handle of x on the wire: nil, a proxy of this client,
// or anything else (foreign).
func (c *Client) handle(x any) uint64 {
	switch v := x.(type) {
	case nil:
		return nilHandle
	case *cq:
		if v != nil && v.c == c {
			return v.h
		}
	case *srq:
		if v != nil && v.c == c {
			return v.h
		}
	case *ah:
		if v != nil && v.c == c {
			return v.h
		}
	}
	return foreignHandle
}

func (p *pd) CreateQP(attr verbs.QPInitAttr) (verbs.QP, error) {
	c := p.d.c
	w := &wireQPInit{Type: attr.Type, Cap: attr.Cap, SignalAll: attr.SignalAll,
		SendCQ: c.handle(attr.SendCQ), RecvCQ: c.handle(attr.RecvCQ), SRQ: c.handle(attr.SRQ)}
	resp, err := c.do(request{Op: opPDCreateQP, Target: p.h, QPInit: w})
	if err != nil {
		return nil, err
	}
	return &qp{c: c, h: resp.Handle, qpn: resp.ID32, typ: resp.Type}, nil
}

func (p *pd) CreateSRQ(maxWR, maxSGE int) (verbs.SRQ, error) {
	resp, err := p.d.c.do(request{Op: opPDCreateSRQ, Target: p.h, N: maxWR, M: maxSGE})
	if err != nil {
		return nil, err
	}
	return &srq{c: p.d.c, h: resp.Handle}, nil
}

func (p *pd) CreateAH(address string) (verbs.AH, error) {
	resp, err := p.d.c.do(request{Op: opPDCreateAH, Target: p.h, Str: address})
	if err != nil {
		return nil, err
	}
	return &ah{c: p.d.c, h: resp.Handle, addr: resp.Str}, nil
}

func (p *pd) CreateAHFromWC(wc *verbs.WC) (verbs.AH, error) {
	if wc == nil {
		return nil, fmt.Errorf("%w: nil work completion", verbs.ErrInvalidArg)
	}
	resp, err := p.d.c.do(request{Op: opPDCreateAHFromWC, Target: p.h, WC: wc})
	if err != nil {
		return nil, err
	}
	return &ah{c: p.d.c, h: resp.Handle, addr: resp.Str}, nil
}

func (p *pd) Dealloc() error {
	_, err := p.d.c.do(request{Op: opPDDealloc, Target: p.h})
	return err
}

// mr is the proxy of a memory region: the server's keys and address, and
// the client's MAP_SHARED mapping of the region's memfd.
type mr struct {
	c      *Client
	d      *device
	h      uint64
	buf    []byte
	n      int
	addr   uint64
	lkey   uint32
	rkey   uint32
	access verbs.Access
	gone   atomic.Bool
}

var _ verbs.MR = (*mr)(nil)

func (m *mr) Bytes() []byte        { return m.buf }
func (m *mr) Addr() uint64         { return m.addr }
func (m *mr) Len() int             { return m.n }
func (m *mr) LKey() uint32         { return m.lkey }
func (m *mr) RKey() uint32         { return m.rkey }
func (m *mr) Access() verbs.Access { return m.access }

var _ verbs.FreeLists = (*mr)(nil)

// PostFree implements verbs.FreeLists in the server.
func (m *mr) PostFree(queue uint32, size uint32, addrs ...uint64) error {
	_, err := m.c.do(request{Op: opMRPostFree, Target: m.h, N: int(queue), M: int(size), Addrs: addrs})
	return err
}

// FreeLen implements verbs.FreeLists in the server.
func (m *mr) FreeLen(queue uint32) int {
	resp, err := m.c.do(request{Op: opMRFreeLen, Target: m.h, N: int(queue)})
	if err != nil {
		return 0
	}
	return resp.N
}

// Quiesce implements verbs.FreeLists in the server.
func (m *mr) Quiesce() { _, _ = m.c.do(request{Op: opMRQuiesce, Target: m.h}) }

// Deregister deregisters the region in the server, then unmaps it here.
func (m *mr) Deregister() error {
	if !m.gone.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: MR already deregistered", verbs.ErrInvalidState)
	}
	_, err := m.c.do(request{Op: opMRDeregister, Target: m.h})
	m.d.mu.Lock()
	delete(m.d.mrs, m)
	m.d.mu.Unlock()
	m.unmap()
	return err
}

func (m *mr) unmap() {
	if m.buf != nil {
		unix.Munmap(m.buf[:cap(m.buf)])
		m.buf = nil
	}
}

// cq is the proxy of a completion queue.
type cq struct {
	c     *Client
	h     uint64
	depth int
}

var _ verbs.CQ = (*cq)(nil)

// Poll polls the server's CQ; the completions are the server's (SrcID,
// QPN), as the server's objects expect them.
func (q *cq) Poll(wc []verbs.WC) (int, error) {
	resp, err := q.c.do(request{Op: opCQPoll, Target: q.h, N: len(wc)})
	n := 0
	if resp != nil {
		n = copy(wc, resp.WCs)
	}
	return n, err
}

func (q *cq) ReqNotify(solicitedOnly bool) error {
	_, err := q.c.do(request{Op: opCQReqNotify, Target: q.h, Bool: solicitedOnly})
	return err
}

// Wait waits in the server, until ctx's deadline (sent along). When ctx
// ends first the server's wait is cancelled and its outcome awaited, so a
// completion event is either reported or left armed, never lost.
func (q *cq) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := request{Op: opCQWait, Target: q.h}
	if dl, ok := ctx.Deadline(); ok {
		req.Deadline = dl.UnixNano()
	}
	cl := q.c.start(&req)
	select {
	case <-cl.done:
	case <-ctx.Done():
		q.c.send(request{Op: opCancel, Target: cl.id})
		<-cl.done
	}
	_, err := cl.result()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return ctx.Err()
	}
	return err
}

func (q *cq) Depth() int { return q.depth }

func (q *cq) Destroy() error {
	_, err := q.c.do(request{Op: opCQDestroy, Target: q.h})
	return err
}

// qp is the proxy of a queue pair.
type qp struct {
	c   *Client
	h   uint64
	qpn uint32
	typ verbs.QPType
}

var _ verbs.QP = (*qp)(nil)

func (q *qp) QPN() uint32        { return q.qpn }
func (q *qp) Type() verbs.QPType { return q.typ }

// State asks the server; a QP whose server is gone is in ERROR.
func (q *qp) State() verbs.QPState {
	resp, err := q.c.do(request{Op: opQPState, Target: q.h})
	if err != nil {
		return verbs.StateError
	}
	return resp.State
}

func (q *qp) Modify(attr verbs.QPAttr) error {
	_, err := q.c.do(request{Op: opQPModify, Target: q.h, QPAttr: &attr})
	return err
}

// PostSend posts in the server. SGEs name the server's addresses and
// lkeys (those of the MR proxies); AHs must be proxies of this client.
func (q *qp) PostSend(wrs []verbs.SendWR) error {
	ws := make([]wireSendWR, len(wrs))
	for i := range wrs {
		w := &wrs[i]
		ws[i] = wireSendWR{
			ID: w.ID, Opcode: w.Opcode, Flags: w.Flags, SGL: w.SGL, Imm: w.Imm,
			RemoteAddr: w.RemoteAddr, RKey: w.RKey, Atomic: w.Atomic,
			ArgAddr: w.ArgAddr, Redirect: w.RedirectAddr, RemoteLen: w.RemoteLen, Queue: w.Queue,
			AH: q.c.handle(w.AH), RemoteQPN: w.RemoteQPN, RemoteQKey: w.RemoteQKey,
		}
	}
	return postErr(q.c.do(request{Op: opQPPostSend, Target: q.h, Send: ws}))
}

func (q *qp) PostRecv(wrs []verbs.RecvWR) error {
	return postErr(q.c.do(request{Op: opQPPostRecv, Target: q.h, Recv: wrs}))
}

func (q *qp) Destroy() error {
	_, err := q.c.do(request{Op: opQPDestroy, Target: q.h})
	return err
}

// postErr makes every post failure a *verbs.PostError: one the server
// returned keeps its index, a transport failure names the first request.
func postErr(_ *response, err error) error {
	if err == nil {
		return nil
	}
	var pe *verbs.PostError
	if errors.As(err, &pe) {
		return err
	}
	return &verbs.PostError{Index: 0, Err: err}
}

// srq is the proxy of a shared receive queue.
type srq struct {
	c *Client
	h uint64
}

var _ verbs.SRQ = (*srq)(nil)

func (s *srq) PostRecv(wrs []verbs.RecvWR) error {
	return postErr(s.c.do(request{Op: opSRQPostRecv, Target: s.h, Recv: wrs}))
}

func (s *srq) Destroy() error {
	_, err := s.c.do(request{Op: opSRQDestroy, Target: s.h})
	return err
}

// ah is the proxy of an address handle.
type ah struct {
	c    *Client
	h    uint64
	addr string
}

var _ verbs.AH = (*ah)(nil)

func (a *ah) Address() string { return a.addr }
