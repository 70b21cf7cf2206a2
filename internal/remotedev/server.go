package remotedev

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Option configures Serve.
type Option func(*config)

type config struct {
	crash  func(verbs.Device) error
	single bool
}

// WithCrash makes Crash calls of clients run f on the server's device
// (e.g. tcp.Crash). Without it they fail with verbs.ErrNotSupported.
func WithCrash(f func(verbs.Device) error) Option {
	return func(c *config) { c.crash = f }
}

// SingleConn makes Serve accept one connection only: it closes the
// listener after the first Accept and returns when that connection ends,
// so a process serving its parent exits with it.
func SingleConn() Option {
	return func(c *config) { c.single = true }
}

// Serve accepts control connections on l, which must be a Unix domain
// socket listener, and serves each on its own goroutine until ctx ends or
// l fails; it then closes l and every connection and returns once they are
// all torn down. Devices opened by a connection are closed when it ends.
// A nil return means ctx ended (or, with SingleConn, the connection ended).
func Serve(ctx context.Context, l net.Listener, opts ...Option) error {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("remotedev: accept: %w", err)
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			c.Close()
			return fmt.Errorf("remotedev: %T is not a Unix domain socket connection", c)
		}
		if cfg.single {
			l.Close()
			serveConn(ctx, uc, &cfg)
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveConn(ctx, uc, &cfg)
		}()
	}
}

// entry is an object of a session and the handle of its device.
type entry struct {
	obj any
	dev uint64
}

// closedDevice stands for a device closed by its client: calls on it fail
// with verbs.ErrClosed, Close succeeds.
type closedDevice struct{}

// session is the server side of one control connection.
type session struct {
	cfg  *config
	conn *conn

	mu    sync.Mutex
	objs  map[uint64]entry
	next  uint64
	calls map[uint64]context.CancelFunc // cancellable calls in progress
}

// serveConn serves one connection until it ends or ctx ends.
func serveConn(ctx context.Context, uc *net.UnixConn, cfg *config) {
	s := &session{cfg: cfg, conn: newConn(uc), objs: map[uint64]entry{}, calls: map[uint64]context.CancelFunc{}}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ctx, func() { uc.Close() })
	var wg sync.WaitGroup
	defer func() {
		cancel()
		stop()
		wg.Wait()
		s.conn.close()
		s.closeAll()
	}()
	for {
		var req request
		if err := s.conn.read(&req); err != nil {
			return
		}
		if req.Op == opCancel {
			s.mu.Lock()
			if f := s.calls[req.Target]; f != nil {
				f()
			}
			s.mu.Unlock()
			continue
		}
		callCtx := ctx
		if req.Op == opCQWait {
			var c context.CancelFunc
			if req.Deadline != 0 {
				callCtx, c = context.WithDeadline(ctx, time.Unix(0, req.Deadline))
			} else {
				callCtx, c = context.WithCancel(ctx)
			}
			s.mu.Lock()
			s.calls[req.ID] = c
			s.mu.Unlock()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, fds := s.handle(callCtx, &req)
			if req.Op == opCQWait {
				s.mu.Lock()
				s.calls[req.ID]()
				delete(s.calls, req.ID)
				s.mu.Unlock()
			}
			resp.ID = req.ID
			resp.FDs = len(fds)
			s.conn.write(resp, fds) // a failed write ends the read loop too
		}()
	}
}

// closeAll closes every device the session opened.
func (s *session) closeAll() {
	s.mu.Lock()
	var devs []verbs.Device
	for _, e := range s.objs {
		if d, ok := e.obj.(verbs.Device); ok {
			devs = append(devs, d)
		}
	}
	s.objs = map[uint64]entry{}
	s.mu.Unlock()
	for _, d := range devs {
		d.Close()
	}
}

func (s *session) add(obj any, dev uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	h := s.next
	if dev == 0 {
		dev = h
	}
	s.objs[h] = entry{obj: obj, dev: dev}
	return h
}

// purge forgets every object of device h and marks h closed.
func (s *session) purge(h uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.objs {
		if e.dev == h {
			delete(s.objs, k)
		}
	}
	s.objs[h] = entry{obj: closedDevice{}, dev: h}
}

// lookup returns the object with handle h as a T, and its device's handle.
func lookup[T any](s *session, h uint64) (T, uint64, error) {
	s.mu.Lock()
	e, ok := s.objs[h]
	s.mu.Unlock()
	var zero T
	if !ok {
		return zero, 0, fmt.Errorf("%w: remotedev: no object with handle %d (its device was closed)", verbs.ErrClosed, h)
	}
	if _, ok := e.obj.(closedDevice); ok {
		return zero, 0, verbs.ErrClosed
	}
	v, ok := e.obj.(T)
	if !ok {
		return zero, 0, fmt.Errorf("%w: remotedev: handle %d is a %T, not a %T", verbs.ErrInvalidArg, h, e.obj, zero)
	}
	return v, e.dev, nil
}

// arg returns the object a handle in an argument names: nil for the nil
// handle, an object no device accepts for a foreign or unknown handle.
func arg[T any](s *session, h uint64) T {
	var zero T
	if h == nilHandle {
		return zero
	}
	s.mu.Lock()
	e, ok := s.objs[h]
	s.mu.Unlock()
	if ok {
		if v, ok := e.obj.(T); ok {
			return v
		}
	}
	if v, ok := any(foreign{}).(T); ok {
		return v
	}
	return zero
}

// foreign stands for an object of another device or process in arguments:
// every device rejects it as one not its own.
type foreign struct{}

func (foreign) Address() string               { return "" }
func (foreign) PostRecv([]verbs.RecvWR) error { return verbs.ErrNotSupported }
func (foreign) Destroy() error                { return verbs.ErrNotSupported }
func (foreign) Poll([]verbs.WC) (int, error)  { return 0, verbs.ErrNotSupported }
func (foreign) ReqNotify(bool) error          { return verbs.ErrNotSupported }
func (foreign) Wait(context.Context) error    { return verbs.ErrNotSupported }
func (foreign) Depth() int                    { return 0 }

var (
	_ verbs.CQ  = foreign{}
	_ verbs.SRQ = foreign{}
	_ verbs.AH  = foreign{}
)

// fder is implemented by memory regions backed by a file descriptor
// (nic.MR).
type fder interface{ FD() int }

// handle executes one call. A panic in the call becomes an error.
func (s *session) handle(ctx context.Context, req *request) (resp *response, fds []int) {
	resp = &response{}
	defer func() {
		if p := recover(); p != nil {
			slog.Error("remotedev: call panicked", "op", req.Op, "panic", p, "stack", string(debug.Stack()))
			resp, fds = &response{Err: encodeError(fmt.Errorf("remotedev: server panic in call %d: %v", req.Op, p))}, nil
		}
	}()
	err := s.exec(ctx, req, resp, &fds)
	resp.Err = encodeError(err)
	return resp, fds
}

func (s *session) exec(ctx context.Context, req *request, resp *response, fds *[]int) error {
	switch req.Op {
	case opOpen:
		d, err := verbs.Open(req.Str)
		if err != nil {
			return err
		}
		resp.Handle = s.add(d, 0)
		resp.Str, resp.ID32, resp.Attr = d.Address(), d.ID(), d.Attr()
		return nil
	case opDevClose:
		s.mu.Lock()
		e, ok := s.objs[req.Target]
		s.mu.Unlock()
		if !ok {
			return fmt.Errorf("%w: remotedev: no device with handle %d", verbs.ErrInvalidArg, req.Target)
		}
		if _, ok := e.obj.(closedDevice); ok {
			return nil
		}
		d, ok := e.obj.(verbs.Device)
		if !ok {
			return fmt.Errorf("%w: remotedev: handle %d is a %T, not a device", verbs.ErrInvalidArg, req.Target, e.obj)
		}
		err := d.Close()
		s.purge(req.Target)
		return err
	case opDevAllocPD:
		d, dev, err := lookup[verbs.Device](s, req.Target)
		if err != nil {
			return err
		}
		pd, err := d.AllocPD()
		if err != nil {
			return err
		}
		resp.Handle = s.add(pd, dev)
		return nil
	case opDevCreateCQ:
		d, dev, err := lookup[verbs.Device](s, req.Target)
		if err != nil {
			return err
		}
		cq, err := d.CreateCQ(req.N)
		if err != nil {
			return err
		}
		resp.Handle, resp.N = s.add(cq, dev), cq.Depth()
		return nil
	case opDevCrash:
		d, _, err := lookup[verbs.Device](s, req.Target)
		if err != nil {
			return err
		}
		if s.cfg.crash == nil {
			return fmt.Errorf("%w: remotedev: this server cannot crash devices", verbs.ErrNotSupported)
		}
		return s.cfg.crash(d)
	case opPDAllocMR:
		pd, dev, err := lookup[verbs.PD](s, req.Target)
		if err != nil {
			return err
		}
		m, err := pd.AllocMR(req.N, req.Access)
		if err != nil {
			return err
		}
		f, ok := m.(fder)
		if !ok || f.FD() < 0 {
			m.Deregister()
			return fmt.Errorf("%w: remotedev: the device's memory regions have no memfd to share (open it with memfd=1)", verbs.ErrNotSupported)
		}
		resp.Handle = s.add(m, dev)
		resp.Addr, resp.N, resp.ID32, resp.Key, resp.Access = m.Addr(), m.Len(), m.LKey(), m.RKey(), m.Access()
		*fds = []int{f.FD()}
		return nil
	case opPDCreateQP:
		pd, dev, err := lookup[verbs.PD](s, req.Target)
		if err != nil {
			return err
		}
		var a verbs.QPInitAttr
		if w := req.QPInit; w != nil {
			a = verbs.QPInitAttr{
				Type:      w.Type,
				SendCQ:    arg[verbs.CQ](s, w.SendCQ),
				RecvCQ:    arg[verbs.CQ](s, w.RecvCQ),
				SRQ:       arg[verbs.SRQ](s, w.SRQ),
				Cap:       w.Cap,
				SignalAll: w.SignalAll,
			}
		}
		q, err := pd.CreateQP(a)
		if err != nil {
			return err
		}
		resp.Handle, resp.ID32, resp.Type, resp.State = s.add(q, dev), q.QPN(), q.Type(), q.State()
		return nil
	case opPDCreateSRQ:
		pd, dev, err := lookup[verbs.PD](s, req.Target)
		if err != nil {
			return err
		}
		srq, err := pd.CreateSRQ(req.N, req.M)
		if err != nil {
			return err
		}
		resp.Handle = s.add(srq, dev)
		return nil
	case opPDCreateAH, opPDCreateAHFromWC:
		pd, dev, err := lookup[verbs.PD](s, req.Target)
		if err != nil {
			return err
		}
		var ah verbs.AH
		if req.Op == opPDCreateAH {
			ah, err = pd.CreateAH(req.Str)
		} else {
			wc := req.WC
			if wc == nil {
				wc = &verbs.WC{}
			}
			ah, err = pd.CreateAHFromWC(wc)
		}
		if err != nil {
			return err
		}
		resp.Handle, resp.Str = s.add(ah, dev), ah.Address()
		return nil
	case opPDDealloc:
		pd, _, err := lookup[verbs.PD](s, req.Target)
		if err != nil {
			return err
		}
		return pd.Dealloc()
	case opMRDeregister:
		m, _, err := lookup[verbs.MR](s, req.Target)
		if err != nil {
			return err
		}
		return m.Deregister()
	case opMRPostFree, opMRFreeLen, opMRQuiesce:
		m, _, err := lookup[verbs.MR](s, req.Target)
		if err != nil {
			return err
		}
		fl, ok := m.(verbs.FreeLists)
		if !ok {
			return fmt.Errorf("%w: the region has no free lists", verbs.ErrNotSupported)
		}
		switch req.Op {
		case opMRPostFree:
			return fl.PostFree(uint32(req.N), uint32(req.M), req.Addrs...)
		case opMRFreeLen:
			resp.N = fl.FreeLen(uint32(req.N))
		default:
			fl.Quiesce()
		}
		return nil
	case opCQPoll:
		cq, _, err := lookup[verbs.CQ](s, req.Target)
		if err != nil {
			return err
		}
		wc := make([]verbs.WC, max(0, min(req.N, maxPoll)))
		n, err := cq.Poll(wc)
		resp.WCs, resp.N = wc[:n], n
		return err
	case opCQReqNotify:
		cq, _, err := lookup[verbs.CQ](s, req.Target)
		if err != nil {
			return err
		}
		return cq.ReqNotify(req.Bool)
	case opCQWait:
		cq, _, err := lookup[verbs.CQ](s, req.Target)
		if err != nil {
			return err
		}
		return cq.Wait(ctx)
	case opCQDestroy:
		cq, _, err := lookup[verbs.CQ](s, req.Target)
		if err != nil {
			return err
		}
		return cq.Destroy()
	case opQPState:
		q, _, err := lookup[verbs.QP](s, req.Target)
		if err != nil {
			return err
		}
		resp.State = q.State()
		return nil
	case opQPModify:
		q, _, err := lookup[verbs.QP](s, req.Target)
		if err != nil {
			return err
		}
		var a verbs.QPAttr
		if req.QPAttr != nil {
			a = *req.QPAttr
		}
		return q.Modify(a)
	case opQPPostSend:
		q, _, err := lookup[verbs.QP](s, req.Target)
		if err != nil {
			return err
		}
		wrs := make([]verbs.SendWR, len(req.Send))
		for i := range req.Send {
			w := &req.Send[i]
			wrs[i] = verbs.SendWR{
				ID: w.ID, Opcode: w.Opcode, Flags: w.Flags, SGL: w.SGL, Imm: w.Imm,
				RemoteAddr: w.RemoteAddr, RKey: w.RKey, Atomic: w.Atomic,
				ArgAddr: w.ArgAddr, RedirectAddr: w.Redirect, RemoteLen: w.RemoteLen, Queue: w.Queue,
				AH: arg[verbs.AH](s, w.AH), RemoteQPN: w.RemoteQPN, RemoteQKey: w.RemoteQKey,
			}
		}
		return q.PostSend(wrs)
	case opQPPostRecv:
		q, _, err := lookup[verbs.QP](s, req.Target)
		if err != nil {
			return err
		}
		return q.PostRecv(req.Recv)
	case opQPDestroy:
		q, _, err := lookup[verbs.QP](s, req.Target)
		if err != nil {
			return err
		}
		return q.Destroy()
	case opSRQPostRecv:
		srq, _, err := lookup[verbs.SRQ](s, req.Target)
		if err != nil {
			return err
		}
		return srq.PostRecv(req.Recv)
	case opSRQDestroy:
		srq, _, err := lookup[verbs.SRQ](s, req.Target)
		if err != nil {
			return err
		}
		return srq.Destroy()
	}
	return fmt.Errorf("%w: remotedev: unknown call %d", verbs.ErrNotSupported, req.Op)
}

// maxPoll bounds the completions one Poll call moves: Poll may return
// fewer than asked.
const maxPoll = 1 << 14
