package transfer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/verbs"
)

// Server is the holder's side: it serves the sealed objects of a Source
// to Fetchers, over verbs pairs (accepted through a cm listener) and over
// the TCP baselines. It is safe for concurrent use.
type Server struct {
	cfg   Config
	src   object.Source
	dev   verbs.Device
	log   *slog.Logger
	stats counters
	ln    *cm.Listener
	tln   net.Listener
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	mu     sync.Mutex
	closed bool
	pairs  map[*hpair]struct{} // every pair not yet released
	conns  map[net.Conn]struct{}
}

// NewServer starts a holder serving src. verbsAddr is the TCP address
// ("host:port", port 0 picks one) of the cm side channel through which
// Fetchers connect pairs to dev; tcpAddr is where the TCP baselines are
// served. Either may be empty to serve only the other (dev may then be
// nil). ctx bounds only the setup. cfg's Slots and SlotSize must match the
// fetchers'.
func NewServer(ctx context.Context, src object.Source, dev verbs.Device, verbsAddr, tcpAddr string, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if verbsAddr != "" && dev == nil {
		return nil, fmt.Errorf("%w: serving verbs pairs needs a device", verbs.ErrInvalidArg)
	}
	s := &Server{
		cfg: cfg, src: src, dev: dev,
		log:   cfg.Logger.With("objstore/transfer", "server"),
		pairs: map[*hpair]struct{}{},
		conns: map[net.Conn]struct{}{},
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	if verbsAddr != "" {
		lc := cm.ListenConfig{Logger: cfg.Logger}
		if s.ln, err = lc.Listen(ctx, dev, verbsAddr); err != nil {
			return nil, fmt.Errorf("transfer: server: %w", err)
		}
		s.wg.Add(1)
		go s.acceptPairs()
	}
	if tcpAddr != "" {
		var nlc net.ListenConfig
		if s.tln, err = nlc.Listen(ctx, "tcp", tcpAddr); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("transfer: server: %w", err)
		}
		s.wg.Add(1)
		go s.acceptTCP()
	}
	return s, nil
}

// VerbsAddr is the address Fetchers of the verbs protocols put in
// Config.Peers ("" when not serving them).
func (s *Server) VerbsAddr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr()
}

// TCPAddr is the address Fetchers of TCP4K and TCPBulk put in
// Config.Peers ("" when not serving them).
func (s *Server) TCPAddr() string {
	if s.tln == nil {
		return ""
	}
	return s.tln.Addr().String()
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

// acceptPairs accepts pairs until Close.
func (s *Server) acceptPairs() {
	defer s.wg.Done()
	for {
		req, err := s.ln.Accept(s.ctx)
		if err != nil {
			return
		}
		if err := s.acceptPair(req); err != nil {
			s.log.Info("transfer: pair not accepted", "peer", req.PeerAddress(), "err", err)
		}
	}
}

func (s *Server) acceptPair(req *cm.Request) error {
	p, err := newPair(s.dev, &s.cfg, &s.stats, req.PeerAddress())
	if err != nil {
		return errors.Join(err, req.Reject("no resources"))
	}
	h := newHPair(p, s.src)
	conn, err := req.Accept(s.ctx, p.options())
	if err != nil {
		p.releaseResources()
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = conn.Close()
		p.releaseResources()
		return object.ErrClosed
	}
	s.pairs[h] = struct{}{}
	s.mu.Unlock()
	go func() {
		<-p.freed
		s.mu.Lock()
		delete(s.pairs, h)
		s.mu.Unlock()
	}()
	if err := p.start(conn); err != nil {
		p.fail(err)
		return err
	}
	h.startWorkers()
	s.stats.pairs.Add(1)
	return nil
}

// acceptTCP accepts TCP baseline connections until Close.
func (s *Server) acceptTCP() {
	defer s.wg.Done()
	for {
		c, err := s.tln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("transfer: TCP accept", "err", err)
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveTCP(c)
	}
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	_ = c.Close()
}

// Close stops the listeners and closes every pair and connection:
// transfers in progress end (their pins released, their regions
// deregistered). Close waits for all of it.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	ps := make([]*hpair, 0, len(s.pairs))
	for h := range s.pairs {
		ps = append(ps, h)
	}
	s.mu.Unlock()
	s.stop()
	var errs []error
	if s.ln != nil {
		errs = append(errs, s.ln.Close())
	}
	if s.tln != nil {
		errs = append(errs, s.tln.Close())
	}
	for _, h := range ps {
		h.close()
	}
	s.wg.Wait()
	return errors.Join(errs...)
}
