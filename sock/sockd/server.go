package sockd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rdmakit/rdmakit/sock"
)

// Defaults of Config's zero fields.
const (
	// DefaultUnix is the daemon's Unix socket (abstract) for local processes.
	DefaultUnix = "@rdmakit-sockd"
	// DefaultPort is the TCP port peers' dialers ask for Resolve.
	DefaultPort = 7479
	// DefaultListen is the TCP address the daemon answers Resolve on.
	DefaultListen = "127.0.0.1:7479"
	// DefaultPIDCheck is how often registered processes are checked.
	DefaultPIDCheck = time.Second
	// DefaultMaxSessions bounds local client connections at once.
	DefaultMaxSessions = 1024
	// DefaultMaxResolvers bounds TCP (Resolve) connections at once.
	DefaultMaxResolvers = 256
	// DefaultIdleTimeout is how long a local client that registered
	// nothing may stay silent.
	DefaultIdleTimeout = 30 * time.Second
)

// ioTimeout bounds a reply's write and a TCP query's read.
const ioTimeout = 5 * time.Second

// Config configures a Server. The zero value serves the defaults.
type Config struct {
	// Unix is the Unix socket local processes talk to: a path, or a name
	// starting with '@' for the abstract namespace. Empty means DefaultUnix.
	Unix string
	// Listen is the TCP address answering other hosts' Resolve queries.
	// Empty means DefaultListen; "none" serves no TCP.
	Listen string
	// Policy is the allow-list and quotas; nil allows everything.
	Policy *Policy
	// PIDCheck is how often the processes of registered listeners are
	// checked; a dead one's listener is dropped. Zero means DefaultPIDCheck.
	PIDCheck time.Duration
	// MaxSessions bounds the local client connections served at once; zero
	// means DefaultMaxSessions.
	MaxSessions int
	// IdleTimeout is how long a local client that has registered nothing
	// may stay silent before it is dropped (so idle connections cannot
	// fill the sessions); a registration's session has none. Zero means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Logger receives the daemon's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Server is the daemon: it keeps the table of registered listeners, admits
// their connections under the policy and answers Resolve queries. Each
// local client connection is a session: whatever it registered and
// admitted is released when it closes — so a process killed with SIGKILL
// leaves nothing behind.
type Server struct {
	cfg  Config
	log  *slog.Logger
	unix net.Listener
	tcp  net.Listener

	mu       sync.Mutex
	t        *table
	sessions map[uint64]*session
	nextID   uint64
	alive    func(pid int) bool // processAlive; tests replace it

	resolvers chan struct{}   // semaphore of TCP connections
	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// session is one local client connection.
type session struct {
	id   uint64
	conn net.Conn
	pid  int // the peer's, from SO_PEERCRED; 0 if unknown
	reg  int // the registered listener's pid; 0 before REGISTER
}

// Start listens on cfg's Unix socket and TCP address and serves until Close.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Unix == "" {
		cfg.Unix = DefaultUnix
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.PIDCheck <= 0 {
		cfg.PIDCheck = DefaultPIDCheck
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Policy != nil {
		if err := cfg.Policy.Validate(); err != nil {
			return nil, err
		}
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger.With("sockd", cfg.Unix),
		t: newTable(cfg.Policy), sessions: map[uint64]*session{}, alive: processAlive,
		resolvers: make(chan struct{}, DefaultMaxResolvers),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var lc net.ListenConfig
	var err error
	if s.unix, err = lc.Listen(ctx, "unix", cfg.Unix); err != nil {
		s.cancel()
		return nil, fmt.Errorf("sockd: listen %s: %w", cfg.Unix, err)
	}
	if cfg.Listen != "none" {
		if s.tcp, err = lc.Listen(ctx, "tcp", cfg.Listen); err != nil {
			s.unix.Close()
			s.cancel()
			return nil, fmt.Errorf("sockd: listen %s: %w", cfg.Listen, err)
		}
		s.wg.Add(1)
		go s.serveTCP()
	}
	s.wg.Add(2)
	go s.serveUnix()
	go s.checkPIDs()
	return s, nil
}

// UnixAddr is the Unix socket clients connect to.
func (s *Server) UnixAddr() string { return s.cfg.Unix }

// TCPAddr is the TCP address answering Resolve queries (with the real port
// when port 0 was asked for), or nil.
func (s *Server) TCPAddr() net.Addr {
	if s.tcp == nil {
		return nil
	}
	return s.tcp.Addr()
}

// SetPolicy replaces the policy; it applies to registrations and
// connections from now on (nothing admitted is revoked).
func (s *Server) SetPolicy(p *Policy) error {
	if p == nil {
		p = &Policy{}
	}
	if err := p.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.t.policy = p
	s.mu.Unlock()
	return nil
}

// Status returns a snapshot of the listeners and applications.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.status()
}

// Close stops serving and ends every session.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.unix.Close()
		if s.tcp != nil {
			s.tcp.Close()
		}
		s.mu.Lock()
		for _, ss := range s.sessions {
			ss.conn.Close()
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
	return nil
}

func (s *Server) closed() bool { return s.ctx.Err() != nil }

// serveUnix accepts local clients.
func (s *Server) serveUnix() {
	defer s.wg.Done()
	for {
		c, err := s.unix.Accept()
		if err != nil {
			if !s.closed() {
				s.log.Error("sockd: accept", "err", err)
			}
			return
		}
		s.mu.Lock()
		if len(s.sessions) >= s.cfg.MaxSessions || s.closed() {
			s.mu.Unlock()
			s.log.Warn("sockd: session refused: table full", "max", s.cfg.MaxSessions)
			c.SetWriteDeadline(time.Now().Add(ioTimeout))
			c.Write((&msg{typ: msgError, code: codeFull, text: "sockd: too many clients"}).encode(nil))
			c.Close()
			continue
		}
		s.nextID++
		ss := &session{id: s.nextID, conn: c, pid: peerPID(c)}
		s.sessions[ss.id] = ss
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveSession(ss)
	}
}

// serveSession answers one local client until it closes; then everything
// it held is released.
func (s *Server) serveSession(ss *session) {
	defer s.wg.Done()
	defer func() {
		ss.conn.Close()
		s.mu.Lock()
		l := s.t.listeners[ss.id]
		s.t.unregister(ss.id)
		delete(s.sessions, ss.id)
		s.mu.Unlock()
		if l != nil {
			s.log.Info("sockd: listener gone", "uri", l.uri, "app", l.info.App, "pid", l.info.PID)
		}
	}()
	buf := make([]byte, maxFrame)
	var out []byte
	for {
		// ss.reg is written by this goroutine only (in register).
		if ss.reg == 0 {
			ss.conn.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		} else {
			ss.conn.SetReadDeadline(time.Time{})
		}
		m, err := readMsg(ss.conn, buf, maxFrame)
		if err != nil {
			s.refuseBad(ss.conn, err)
			return
		}
		reply, ok := s.handle(ss, m)
		if !ok {
			s.refuseBad(ss.conn, fmt.Errorf("%w: message type %d from a local client", ErrProtocol, m.typ))
			return
		}
		if reply == nil {
			continue
		}
		reply.id = m.id
		out = reply.encode(out[:0])
		ss.conn.SetWriteDeadline(time.Now().Add(ioTimeout))
		if _, err := ss.conn.Write(out); err != nil {
			return
		}
	}
}

// refuseBad tells a peer that broke the protocol why it is being dropped.
func (s *Server) refuseBad(c net.Conn, err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrVersion) {
		return // a failed read: the peer is gone
	}
	s.log.Warn("sockd: dropping a client", "remote", c.RemoteAddr(), "err", err)
	c.SetWriteDeadline(time.Now().Add(ioTimeout))
	c.Write((&msg{typ: msgError, code: errorCode(err), text: err.Error()}).encode(nil))
}

// handle answers a local client's request: the reply (nil for none) and
// whether the request was one a local client may send.
func (s *Server) handle(ss *session, m msg) (*msg, bool) {
	switch m.typ {
	case msgRegister:
		return s.register(ss, m), true
	case msgAdmit:
		s.mu.Lock()
		p, err := s.t.admit(ss.id, m.app, int(m.parts))
		s.mu.Unlock()
		if err != nil {
			s.log.Debug("sockd: refused", "app", m.app, "err", err)
			return errorMsg(err), true
		}
		return &msg{typ: msgAdmitted, part: int32(p)}, true
	case msgRelease:
		s.mu.Lock()
		s.t.release(ss.id, m.app, int(m.part), int(min(m.count, maxCount)))
		s.mu.Unlock()
		return nil, true
	case msgResolve:
		return s.resolve(m), true
	case msgStatus:
		st := s.Status()
		body, err := json.Marshal(st)
		if err != nil {
			return errorMsg(err), true
		}
		return &msg{typ: msgStatusReply, body: body}, true
	}
	return nil, false
}

func errorMsg(err error) *msg { return &msg{typ: msgError, code: errorCode(err), text: err.Error()} }

// register records the session's listener. The process is the one the
// kernel says is at the other end of the socket: a client cannot register
// for another process.
func (s *Server) register(ss *session, m msg) *msg {
	addr, err := parseAddr(m.uri)
	if err != nil {
		return errorMsg(err)
	}
	if ss.pid != 0 && int(m.pid) != ss.pid {
		return errorMsg(fmt.Errorf("%w: registers pid %d from pid %d", ErrProtocol, m.pid, ss.pid))
	}
	info := sock.ListenerInfo{Addr: addr, App: m.app, PID: int(m.pid), Partitions: int(m.parts), RingSize: int(m.ring), MTU: int(m.mtu)}
	s.mu.Lock()
	err = s.t.register(ss.id, info)
	if err == nil {
		ss.reg = info.PID
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Info("sockd: registration refused", "uri", m.uri, "app", m.app, "err", err)
		return errorMsg(err)
	}
	s.log.Info("sockd: listener registered", "uri", m.uri, "app", m.app, "pid", m.pid, "partitions", m.parts)
	return &msg{typ: msgOK}
}

func (s *Server) resolve(m msg) *msg {
	s.mu.Lock()
	uri, ok := s.t.resolve(m.net, m.addr)
	s.mu.Unlock()
	return &msg{typ: msgResolved, ok: ok, uri: uri}
}

// parseAddr splits "shm://NAME" or "tcp://HOST:PORT".
func parseAddr(uri string) (sock.Addr, error) {
	tr, host, ok := strings.Cut(uri, "://")
	if !ok || host == "" || (tr != "shm" && tr != "tcp") {
		return sock.Addr{}, fmt.Errorf("%w: listener address %q", ErrProtocol, uri)
	}
	if tr == "tcp" {
		if _, _, err := net.SplitHostPort(host); err != nil {
			return sock.Addr{}, fmt.Errorf("%w: listener address %q", ErrProtocol, uri)
		}
	}
	return sock.Addr{Transport: tr, Host: host}, nil
}

// serveTCP answers other hosts' Resolve queries: nothing else is served
// over TCP.
func (s *Server) serveTCP() {
	defer s.wg.Done()
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			if !s.closed() {
				s.log.Error("sockd: accept", "err", err)
			}
			return
		}
		select {
		case s.resolvers <- struct{}{}:
		default:
			c.Close() // too many at once: the dialer falls back to TCP
			continue
		}
		s.wg.Add(1)
		go s.serveResolver(c)
	}
}

func (s *Server) serveResolver(c net.Conn) {
	defer s.wg.Done()
	defer func() { <-s.resolvers }()
	defer c.Close()
	stop := context.AfterFunc(s.ctx, func() { c.Close() })
	defer stop()
	buf := make([]byte, maxFrame)
	var out []byte
	for {
		c.SetDeadline(time.Now().Add(ioTimeout))
		m, err := readMsg(c, buf, maxFrame)
		if err != nil {
			s.refuseBad(c, err)
			return
		}
		if m.typ != msgResolve {
			s.refuseBad(c, fmt.Errorf("%w: message type %d over TCP", ErrProtocol, m.typ))
			return
		}
		reply := s.resolve(m)
		reply.id = m.id
		out = reply.encode(out[:0])
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// checkPIDs drops the listeners of processes that died while something
// else keeps their socket open (a child that inherited it, say).
func (s *Server) checkPIDs() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.PIDCheck)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		for _, ss := range s.sessions {
			if ss.reg != 0 && !s.alive(ss.reg) {
				s.log.Info("sockd: listener's process died", "pid", ss.reg)
				ss.conn.Close()
			}
		}
		s.mu.Unlock()
	}
}

// processAlive says whether process pid exists.
func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) != syscall.ESRCH
}

// peerPID is the process at the other end of a Unix socket, or 0.
func peerPID(c net.Conn) int {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	raw.Control(func(fd uintptr) {
		if cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}
