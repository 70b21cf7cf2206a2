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
// connection's buffers. It is Attach followed by ServerConn.Serve; a
// connection whose peer may send as soon as it is connected should be
// attached before it is (see Attach). Serve returns when ctx ends (nil) or
// the connection fails.
func (s *Server) Serve(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ) error {
	c, err := s.Attach(pd, qp)
	if err != nil {
		return err
	}
	return c.Serve(ctx, cq)
}

// Attach registers a connection's buffers in pd and posts its receives on
// qp, which may still be in INIT or RTR. Attach a connection before its
// peer can send, i.e. before the peer learns the connection is ready
// (cm.Options.Prepare does it during the exchange): a SEND that finds no
// receive is retried only as often as the client's RNR retry count
// allows, and fails the client's connection after that. Then run the
// returned connection's Serve once it is in RTS, or Close it.
func (s *Server) Attach(pd verbs.PD, qp verbs.QP) (*ServerConn, error) {
	return s.newConn(pd, qp)
}

// Serve serves the connection: its send and receive completions go to
// cq. Every request completion of a poll is handled in turn and their
// responses go out as one post list. A client may open HERD requests on
// the connection (ClientConfig.Herd): Serve then also polls the
// connection's request region, handling every new request of a pass and
// answering them with the same post list. Stop Serve (end ctx and wait
// for it to return) before closing the device. Serve returns when ctx
// ends (nil) or the connection fails, and frees the connection's buffers
// (it closes c). Serve a connection at most once.
func (c *ServerConn) Serve(ctx context.Context, cq verbs.CQ) error {
	if c.closed {
		return fmt.Errorf("rpc: serving a closed connection: %w", ErrClosed)
	}
	defer c.Close()
	c.ctx = ctx
	s, qp := c.s, c.qp
	var err error
	wc := make([]verbs.WC, 64)
	var idle idler
	for {
		var k int
		if c.herd == nil {
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
		c.sends = c.sends[:0]
		if _, err := c.router.Dispatch(wc[:k]); err != nil {
			if errors.Is(err, errStopped) {
				return nil
			}
			return err
		}
		if c.herd != nil {
			var taken int
			c.sends, taken, err = c.herd.scan(s, c.sends, c.herdTag)
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
		if len(c.sends) > 0 {
			if err := qp.PostSend(c.sends); err != nil {
				if errors.Is(err, verbs.ErrInvalidState) && ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}
