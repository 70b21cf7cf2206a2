package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rdmakit/rdmakit/verbs"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// MaxMessage bounds requests and responses, header included (default
	// DefaultMaxMessage, at least MinMessage).
	MaxMessage int
	// Recvs is the number of receives a connection keeps posted (default
	// 64); give it some headroom over the clients' Slots, since a receive
	// is posted again only once the answer to its request has completed.
	Recvs int
	// Poll is how a connection's loop waits for work (default adaptive).
	Poll verbs.PollPolicy
}

func (c *ServerConfig) defaults() {
	if c.MaxMessage <= 0 {
		c.MaxMessage = DefaultMaxMessage
	}
	if c.MaxMessage < MinMessage {
		c.MaxMessage = MinMessage
	}
	if c.Recvs <= 0 {
		c.Recvs = 64
	}
	if c.Poll == (verbs.PollPolicy{}) {
		c.Poll = verbs.PollAdaptive
	}
}

// Server dispatches calls to handlers. Serve runs one connection; a
// server serves any number at once.
type Server struct {
	cfg      ServerConfig
	mu       sync.RWMutex
	handlers map[uint16]Handler
}

// NewServer returns a server without handlers.
func NewServer(c ServerConfig) *Server {
	c.defaults()
	return &Server{cfg: c, handlers: map[uint16]Handler{}}
}

// Handle registers h for method (replacing an earlier one).
func (s *Server) Handle(method uint16, h Handler) {
	s.mu.Lock()
	s.handlers[method] = h
	s.mu.Unlock()
}

// Config returns the server's configuration after defaults.
func (s *Server) Config() ServerConfig { return s.cfg }

// handle runs the handler of the request in msg and writes the response
// message (header and payload) into out, returning its length.
func (s *Server) handle(msg, out []byte) int {
	method, _, id, ok := parseHeader(msg)
	if !ok {
		return 0
	}
	s.mu.RLock()
	h := s.handlers[method]
	s.mu.RUnlock()
	var n int
	var err error
	if h == nil {
		err = ErrNoMethod
	} else {
		n, err = h(msg[Header:], out[Header:])
		if err == nil && (n < 0 || n > len(out)-Header) {
			err = fmt.Errorf("%w: a %d-byte response", ErrTooLarge, n)
		}
	}
	if err != nil {
		return errorResponse(out, method, id, err)
	}
	putHeader(out, method, 0, id)
	return Header + n
}

// sendTag marks the wr_id of a SEND answering a SEND request.
const sendTag = 1 << 32

// open answers a client's MethodHerdOpen call into out (header
// included): on success *herd holds the new request region.
func (s *Server) open(pd verbs.PD, first bool, herd **herdRegion, method uint16, id uint32, req, out []byte) int {
	var err error
	m := 0
	if !first {
		err = fmt.Errorf("%w: HERD requests are already open on this connection", verbs.ErrInvalidArg)
	} else {
		var h *herdRegion
		h, m, err = s.openHerd(pd, req, out[Header:])
		if err == nil {
			*herd = h
		}
	}
	if err != nil {
		return errorResponse(out, method, id, err)
	}
	putHeader(out, method, 0, id)
	return Header + m
}

// Serve serves the SEND/RECV path of one connection: qp is connected (in
// RTS), its send and receive completions go to cq, and pd registers the
// connection's buffers. Every request completion of a poll is handled in
// turn and their responses go out as one post list. A client may open
// HERD requests on the connection (ClientConfig.Herd): Serve then also
// polls the connection's request region, handling every new request of a
// pass and answering them with the same post list. Stop Serve (end ctx
// and wait for it to return) before closing the device. Serve returns when
// ctx ends (nil) or the connection fails.
func (s *Server) Serve(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ) error {
	n, size := s.cfg.Recvs, s.cfg.MaxMessage
	mr, err := pd.AllocMR(2*n*size, verbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	defer mr.Deregister()
	buf := mr.Bytes()
	recvSGE := func(i int) verbs.SGE {
		return verbs.SGE{Addr: mr.Addr() + uint64(i*size), Length: uint32(size), LKey: mr.LKey()}
	}
	recvs := make([]verbs.RecvWR, n)
	for i := range recvs {
		recvs[i] = verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{recvSGE(i)}}
	}
	if err := qp.PostRecv(recvs); err != nil {
		return err
	}
	// Response i answers the request in receive i; receive i is posted
	// again once response i's SEND has completed.
	sends := make([]verbs.SendWR, 0, n)
	sgl := make([]verbs.SGE, n)
	one := make([]verbs.RecvWR, 1)
	wc := make([]verbs.WC, 64)
	var herd *herdRegion // once the client opened HERD requests
	defer func() {
		if herd != nil {
			herd.close()
		}
	}()
	var idle idler
	for {
		var k int
		if herd == nil {
			k, err = verbs.PollWait(ctx, cq, wc, s.cfg.Poll)
		} else {
			k, err = cq.Poll(wc)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		sends = sends[:0]
		for i := 0; i < k; i++ {
			w := &wc[i]
			if w.Status != verbs.StatusSuccess {
				if w.Status == verbs.StatusWRFlushErr && ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("rpc: server connection: %v: %w", w.Opcode, w.Status.Err())
			}
			if w.ID&herdTag != 0 {
				herd.busy[w.ID&^herdTag] = false
				continue
			}
			if w.ID&sendTag != 0 {
				slot := int(w.ID &^ sendTag)
				one[0] = verbs.RecvWR{ID: uint64(slot), SGL: []verbs.SGE{recvSGE(slot)}}
				if err := qp.PostRecv(one); err != nil {
					return err
				}
				continue
			}
			if w.Opcode != verbs.WCRecv {
				continue
			}
			slot := int(w.ID)
			req := buf[slot*size : slot*size+int(w.ByteLen)]
			out := buf[(n+slot)*size : (n+slot+1)*size]
			var m int
			if method, _, id, ok := parseHeader(req); ok && method == MethodHerdOpen {
				m = s.open(pd, herd == nil, &herd, method, id, req[Header:], out)
			} else {
				m = s.handle(req, out)
			}
			if m == 0 { // malformed: drop it, keep the receive
				one[0] = verbs.RecvWR{ID: uint64(slot), SGL: []verbs.SGE{recvSGE(slot)}}
				if err := qp.PostRecv(one); err != nil {
					return err
				}
				continue
			}
			sgl[slot] = verbs.SGE{Addr: mr.Addr() + uint64((n+slot)*size), Length: uint32(m), LKey: mr.LKey()}
			sends = append(sends, verbs.SendWR{ID: sendTag | uint64(slot), Opcode: verbs.OpSend, Flags: verbs.FlagSignaled, SGL: sgl[slot : slot+1]})
		}
		if herd != nil {
			var taken int
			sends, taken, err = herd.scan(s, sends)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			if k == 0 && taken == 0 {
				if err := idle.wait(ctx); err != nil {
					return nil
				}
			} else {
				idle.reset()
			}
		}
		if len(sends) > 0 {
			if err := qp.PostSend(sends); err != nil {
				if errors.Is(err, verbs.ErrInvalidState) && ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}
