package memnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/verbs"
)

// Server is a running memory server: a device, a Service and the clients
// connected through its connection manager. Start one with Start, stop it
// with Close; its methods are safe for concurrent use.
type Server struct {
	cfg  Config
	dev  verbs.Device
	pd   verbs.PD
	svc  Service
	ln   *cm.Listener
	log  *slog.Logger
	info Info
	met  *metricsServer

	// ctx is every handshake's and session's; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop, the prober, every client's goroutine

	mu      sync.Mutex
	clients map[*client]struct{} // established, for the prober and Stats

	handshakes atomic.Int64  // exchanges under way
	accepted   atomic.Uint64 // clients established, ever
	rejected   atomic.Uint64 // requests refused or failed, ever
	departed   atomic.Uint64 // clients found gone, ever

	closeOnce sync.Once
	closeErr  error
}

// Stats are a Server's client counters.
type Stats struct {
	// Clients is the number of clients served now: each holds a QP, the
	// session's CQ and buffers, and a goroutine.
	Clients int
	// Handshakes is the number of connection exchanges under way.
	Handshakes int
	// Accepted counts the clients established, Rejected the requests
	// refused (bad token, wrong service) or failed during the exchange,
	// Departed the clients the server found gone (probe or QP error).
	Accepted, Rejected, Departed uint64
}

// Start opens cfg.Device, builds the service and listens on cfg.CM; it
// serves clients until Close. ctx bounds only the start. A configuration
// the server could not serve a single client with (e.g. more receives
// than the device allows) fails here, not at the first client.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, clients: map[*client]struct{}{}}
	uri, err := deviceURI(cfg.Device, cfg.Token, cfg.MaxClients)
	if err != nil {
		return nil, err
	}
	if s.dev, err = verbs.Open(uri); err != nil {
		return nil, err
	}
	s.log = s.log.With("device", s.dev.Address())
	defer func() {
		if err != nil {
			if s.svc != nil {
				s.svc.Close()
			}
			s.dev.Close() // frees everything created on it
		}
	}()
	if s.pd, err = s.dev.AllocPD(); err != nil {
		return nil, err
	}
	newService := cfg.NewService
	if newService == nil {
		newService = func(dev verbs.Device, pd verbs.PD) (Service, error) {
			r, err := newRegions(&s.cfg, dev, pd)
			if err != nil {
				return nil, err // not a typed nil
			}
			return r, nil
		}
	}
	if s.svc, err = newService(s.dev, s.pd); err != nil {
		return nil, err
	}
	// One client's resources, made and freed: a limit of the device the
	// configuration exceeds shows now.
	sess, err := s.svc.Open()
	if err != nil {
		return nil, fmt.Errorf("memnode: the resources of one client: %w", err)
	}
	if err = sess.Close(); err != nil {
		return nil, err
	}
	lc := cm.ListenConfig{HandshakeTimeout: cfg.HandshakeTimeout, Logger: cfg.Logger}
	if s.ln, err = lc.Listen(ctx, s.dev, cfg.CM); err != nil {
		return nil, err
	}
	s.info = Info{Device: s.dev.Address(), CM: s.ln.Addr(), Service: s.svc.Name(), Token: cfg.Token != "", Regions: []Region{}}
	s.svc.Describe(&s.info)
	if cfg.Metrics != "" {
		if s.met, err = startMetrics(s, cfg.Metrics); err != nil {
			s.ln.Close()
			return nil, err
		}
		s.info.Metrics = s.met.url
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.acceptLoop()
	if cfg.Probe > 0 {
		s.wg.Add(1)
		go s.prober()
	}
	s.log.Info("memnode serving", "cm", s.info.CM, "service", s.info.Service, "metrics", s.info.Metrics)
	return s, nil
}

// Run starts a server, calls ready with its Info (nil: not called),
// serves until ctx ends and closes the server.
func Run(ctx context.Context, cfg Config, ready func(Info)) error {
	s, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(s.Info())
	}
	<-ctx.Done()
	return s.Close()
}

// deviceURI returns uri with the query parameter token set (when there
// is a token) and, on a tcp:// device that sets none, maxconns= for
// maxClients clients: each may hold a connection to the device and the
// device one to it.
func deviceURI(uri, token string, maxClients int) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", &ConfigError{"Device", uri, err.Error()}
	}
	q := u.Query()
	changed := false
	if token != "" {
		q.Set("token", token)
		changed = true
	}
	if u.Scheme == "tcp" && !q.Has("maxconns") {
		q.Set("maxconns", strconv.Itoa(2*maxClients+16))
		changed = true
	}
	if !changed {
		return uri, nil
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Info describes the server to clients.
func (s *Server) Info() Info { return s.info }

// Device returns the server's device (for its address and stats).
func (s *Server) Device() verbs.Device { return s.dev }

// Stats returns the server's client counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	n := len(s.clients)
	s.mu.Unlock()
	return Stats{Clients: n, Handshakes: int(s.handshakes.Load()), Accepted: s.accepted.Load(),
		Rejected: s.rejected.Load(), Departed: s.departed.Load()}
}

// acceptLoop hands every connection request to a goroutine of its own,
// so that one slow exchange delays no other.
func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		req, err := s.ln.Accept(s.ctx)
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, cm.ErrClosed) {
				return
			}
			s.log.Warn("memnode: cm accept", "err", err)
			continue
		}
		s.wg.Add(1)
		s.handshakes.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveClient(req)
		}()
	}
}

// prober checks every client each cfg.Probe, until Close.
func (s *Server) prober() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Probe)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		// Holding mu, no client is released under its probe.
		s.mu.Lock()
		for c := range s.clients {
			c.probe()
		}
		s.mu.Unlock()
	}
}

// serveClient answers req and, once connected, serves the client until
// it departs or the server closes, then frees everything made for it.
func (s *Server) serveClient(req *cm.Request) {
	log := s.log.With("peer", req.PeerAddress(), "peer_qpn", req.PeerQPN())
	c, err := s.handshake(req)
	s.handshakes.Add(-1)
	if err != nil {
		s.rejected.Add(1)
		log.Warn("connection refused", "err", err)
		return
	}
	ctx, cancel := context.WithCancelCause(s.ctx)
	c.cancel = cancel
	tracked := s.track(c, true)
	// Counted once tracked: whoever sees the count sees the client in
	// Stats().Clients too.
	s.accepted.Add(1)
	log.Info("connection established", "qpn", c.conn.QP().QPN())
	if !tracked { // Close came first
		cancel(nil)
		s.release(c)
		return
	}
	err = c.sess.Serve(ctx, c.conn.QP(), &probeCQ{CQ: c.sess.Options().SendCQ, c: c})
	cause := context.Cause(ctx)
	cancel(nil)
	s.track(c, false)
	s.release(c)
	switch {
	case errors.Is(cause, ErrDeparted):
		s.departed.Add(1)
		log.Info("connection ends: the peer is gone", "err", cause)
	case err != nil && errors.Is(err, verbs.StatusRetryExcErr.Err()):
		s.departed.Add(1)
		log.Info("connection ends: the peer is gone", "err", err)
	case err != nil:
		log.Warn("connection ends", "err", err)
	default:
		log.Debug("connection closed by shutdown")
	}
}

// handshake checks req's token and service, opens a session and accepts
// the connection; on failure everything it made is freed and the client
// told why.
func (s *Server) handshake(req *cm.Request) (*client, error) {
	h := parseHello(req.PrivateData(), s.svc.Name() != "")
	if !s.admitOne() {
		req.Reject(fmt.Sprintf("node full: %d clients", s.cfg.MaxClients))
		return nil, fmt.Errorf("node full: %d clients", s.cfg.MaxClients)
	}
	if !tokenOK(h.Token, s.cfg.Token) {
		req.Reject("bad token")
		return nil, errors.New("bad token")
	}
	if err := s.svc.Admit(h.Service); err != nil {
		req.Reject(err.Error())
		return nil, err
	}
	sess, err := s.svc.Open()
	if err != nil {
		req.Reject("node: " + err.Error())
		return nil, err
	}
	opts := sess.Options()
	opts.PD = s.pd
	if p, ok := sess.(Preparer); ok {
		opts.Prepare = p.Prepare
	}
	// The server's context: Close cuts a handshake under way; the
	// listener's HandshakeTimeout bounds it otherwise.
	conn, err := req.Accept(s.ctx, opts)
	if err != nil {
		return nil, errors.Join(err, sess.Close())
	}
	return &client{conn: conn, sess: sess,
		probeWR: []verbs.SendWR{{ID: probeID, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled}}}, nil
}

// admitOne reports whether one more client fits: the clients served
// plus the exchanges under way (this one among them) are at most
// cfg.MaxClients.
func (s *Server) admitOne() bool {
	s.mu.Lock()
	n := len(s.clients)
	s.mu.Unlock()
	return n+int(s.handshakes.Load()) <= s.cfg.MaxClients
}

// track adds an established client to the server's set (false when the
// server is closing), or removes it.
func (s *Server) track(c *client, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.clients, c)
		return true
	}
	if s.ctx.Err() != nil {
		return false
	}
	s.clients[c] = struct{}{}
	return true
}

// release destroys the client's QP, then what its session made.
func (s *Server) release(c *client) {
	if err := errors.Join(c.conn.Close(), c.sess.Close()); err != nil {
		s.log.Warn("memnode: releasing a client", "peer", c.conn.PeerAddress(), "err", err)
	}
}

// Close stops the server: it stops accepting, cuts the handshakes under
// way, ends every session, waits for them at most
// Config.ShutdownTimeout, releases the service and closes the device
// (which frees whatever a session that did not end in time still holds).
// It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown() })
	return s.closeErr
}

func (s *Server) shutdown() error {
	s.mu.Lock()
	s.cancel() // under mu: track refuses clients from now on
	n := len(s.clients)
	s.mu.Unlock()
	s.log.Info("memnode shutting down", "clients", n)
	errs := []error{s.ln.Close()}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	t := time.NewTimer(s.cfg.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-done:
		errs = append(errs, s.svc.Close())
	case <-t.C:
		// A session stuck in its service (e.g. a device call blocked on a
		// peer): its memory goes with the device.
		s.log.Warn("memnode: sessions did not end in time; closing the device under them", "after", s.cfg.ShutdownTimeout)
	}
	if s.met != nil {
		errs = append(errs, s.met.close())
	}
	errs = append(errs, s.dev.Close())
	return errors.Join(errs...)
}
