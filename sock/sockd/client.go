package sockd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/sock"
)

// Defaults of Client's zero fields.
const (
	// DefaultResolveTimeout bounds a Resolve query to a peer's sockd: no
	// answer in time means "no rdmakit endpoint" and plain TCP.
	DefaultResolveTimeout = 500 * time.Millisecond
	// DefaultCacheTTL is how long a Resolve answer, yes or no, is reused.
	DefaultCacheTTL = 2 * time.Second
	// maxCache bounds the Resolve cache.
	maxCache = 1024
)

// Client is the library's side of the daemon: a sock.ControlPlane that
// talks to the local sockd over its Unix socket and to other hosts' sockds
// over TCP. Put it in sock.Config.Control. The zero value is ready to use.
//
// Each Register holds a connection to the daemon open for the listener's
// life: the listener's Admit and Release go over it, and its end — the
// listener's Close, or its process's death — withdraws the listener and
// releases every connection admitted to it. If the daemon is gone, Admit
// fails and the listener refuses connections (quotas cannot be enforced
// without it).
type Client struct {
	// Unix is the local daemon's socket; empty means DefaultUnix.
	Unix string
	// Port is the TCP port of other hosts' daemons; zero means DefaultPort.
	Port int
	// ResolveTimeout bounds a Resolve query; zero means
	// DefaultResolveTimeout.
	ResolveTimeout time.Duration
	// CacheTTL is how long Resolve answers are reused; zero means
	// DefaultCacheTTL, negative means never.
	CacheTTL time.Duration

	mu       sync.Mutex
	sessions map[string]*clientSession // by listener URI
	cache    map[string]cacheEntry
}

var _ sock.ControlPlane = (*Client)(nil)

type cacheEntry struct {
	uri     string
	ok      bool
	expires time.Time
}

func (c *Client) unixAddr() string {
	if c.Unix == "" {
		return DefaultUnix
	}
	return c.Unix
}

// Register announces a listener to the local daemon and keeps the
// connection that holds its registration; unregister closes it.
func (c *Client) Register(ctx context.Context, info sock.ListenerInfo) (func(), error) {
	uri := info.Addr.String()
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", c.unixAddr())
	if err != nil {
		return nil, fmt.Errorf("sockd: connect to %s: %w", c.unixAddr(), err)
	}
	req := msg{typ: msgRegister, id: 1, uri: uri, app: info.App, pid: uint32(info.PID),
		parts: uint32(info.Partitions), ring: uint32(info.RingSize), mtu: uint32(info.MTU)}
	reply, err := exchange(ctx, conn, req, maxFrame)
	if err == nil && reply.typ != msgOK {
		err = unexpected(reply)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("sockd: register %s: %w", uri, err)
	}
	s := newClientSession(conn)
	c.mu.Lock()
	if c.sessions == nil {
		c.sessions = map[string]*clientSession{}
	}
	old := c.sessions[uri]
	c.sessions[uri] = s
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			if c.sessions[uri] == s {
				delete(c.sessions, uri)
			}
			c.mu.Unlock()
			s.close()
		})
	}, nil
}

func (c *Client) session(a sock.Addr) *clientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[a.String()]
}

// Admit asks the daemon to admit a connection from peerApp to the
// listener at addr, over that listener's registration.
func (c *Client) Admit(ctx context.Context, addr sock.Addr, peerApp string, partitions int) (int, error) {
	s := c.session(addr)
	if s == nil {
		return 0, fmt.Errorf("sockd: admit to %s: %w", addr, ErrNotRegistered)
	}
	reply, err := s.request(ctx, msg{typ: msgAdmit, app: peerApp, parts: uint32(partitions)})
	if err != nil {
		return 0, fmt.Errorf("sockd: admit to %s: %w", addr, err)
	}
	switch {
	case reply.typ == msgError:
		return 0, replyError(reply)
	case reply.typ != msgAdmitted:
		return 0, fmt.Errorf("sockd: admit to %s: %w", addr, unexpected(reply))
	case reply.part < 0 || int(reply.part) >= partitions:
		return 0, fmt.Errorf("sockd: admit to %s: partition %d of %d: %w", addr, reply.part, partitions, ErrProtocol)
	}
	return int(reply.part), nil
}

// Release tells the daemon a connection it admitted ended. It never
// blocks: releases are queued, merged and sent by the registration's
// writer (and always before the next Admit).
func (c *Client) Release(addr sock.Addr, peerApp string, partition int) {
	if s := c.session(addr); s != nil {
		s.release(peerApp, partition)
	}
}

// Resolve asks the sockd of address's host (at Port) whether a listener is
// registered at tcp://address. Nothing is sent to address itself: no
// daemon (refused, or no answer within ResolveTimeout) or no such listener
// means not ok, and the caller dials plain TCP. Answers are cached for
// CacheTTL.
func (c *Client) Resolve(ctx context.Context, network, address string) (string, bool, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return "", false, nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return "", false, nil
	}
	key := network + " " + address
	if e, ok := c.cached(key); ok {
		return e.uri, e.ok, nil
	}
	uri, ok, err := c.ask(ctx, host, network, address)
	if err != nil {
		return "", false, err
	}
	c.remember(key, uri, ok)
	return uri, ok, nil
}

// ask queries host's daemon. A daemon that is not there is an answer (no);
// one that answers nonsense is an error.
func (c *Client) ask(ctx context.Context, host, network, address string) (string, bool, error) {
	timeout := c.ResolveTimeout
	if timeout <= 0 {
		timeout = DefaultResolveTimeout
	}
	port := c.Port
	if port == 0 {
		port = DefaultPort
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, fmt.Sprint(port)))
	if err != nil {
		return "", false, nil
	}
	defer conn.Close()
	reply, err := exchange(ctx, conn, msg{typ: msgResolve, id: 1, net: network, addr: address}, maxFrame)
	switch {
	case err != nil:
		return "", false, fmt.Errorf("sockd: resolve %s: %w", address, err)
	case reply.typ == msgError:
		return "", false, fmt.Errorf("sockd: resolve %s: %w", address, replyError(reply))
	case reply.typ != msgResolved:
		return "", false, fmt.Errorf("sockd: resolve %s: %w", address, unexpected(reply))
	case !reply.ok:
		return "", false, nil
	case reply.uri != "tcp://"+address:
		// A daemon names only the address asked about: it cannot send the
		// dialer elsewhere.
		return "", false, fmt.Errorf("sockd: resolve %s: answered %q: %w", address, reply.uri, ErrProtocol)
	}
	return reply.uri, true, nil
}

func (c *Client) ttl() time.Duration {
	if c.CacheTTL == 0 {
		return DefaultCacheTTL
	}
	return c.CacheTTL
}

func (c *Client) cached(key string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cache[key]
	if !ok || time.Now().After(e.expires) {
		return cacheEntry{}, false
	}
	return e, true
}

func (c *Client) remember(key, uri string, ok bool) {
	ttl := c.ttl()
	if ttl < 0 {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache == nil {
		c.cache = map[string]cacheEntry{}
	}
	if len(c.cache) >= maxCache {
		for k, e := range c.cache {
			if now.After(e.expires) {
				delete(c.cache, k)
			}
		}
		if len(c.cache) >= maxCache {
			clear(c.cache)
		}
	}
	c.cache[key] = cacheEntry{uri: uri, ok: ok, expires: now.Add(ttl)}
}

// Status asks the local daemon for its table.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", c.unixAddr())
	if err != nil {
		return st, fmt.Errorf("sockd: connect to %s: %w", c.unixAddr(), err)
	}
	defer conn.Close()
	reply, err := exchange(ctx, conn, msg{typ: msgStatus, id: 1}, maxStatusFrame)
	switch {
	case err != nil:
		return st, fmt.Errorf("sockd: status: %w", err)
	case reply.typ == msgError:
		return st, fmt.Errorf("sockd: status: %w", replyError(reply))
	case reply.typ != msgStatusReply:
		return st, fmt.Errorf("sockd: status: %w", unexpected(reply))
	}
	if err := json.Unmarshal(reply.body, &st); err != nil {
		return st, fmt.Errorf("sockd: status: %w: %w", ErrProtocol, err)
	}
	return st, nil
}

// exchange sends one request on conn and reads its reply, within ctx.
func exchange(ctx context.Context, conn net.Conn, req msg, limit int) (msg, error) {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	} else {
		conn.SetDeadline(time.Now().Add(ioTimeout))
	}
	defer conn.SetDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	_, werr := conn.Write(req.encode(nil))
	// Even when the write failed, the daemon may have said why it closed
	// the connection (it is full, say): read that first.
	reply, err := readMsg(conn, nil, limit)
	if werr != nil && (err != nil || reply.typ != msgError) {
		return msg{}, werr
	}
	if err != nil {
		return msg{}, err
	}
	// An ERROR with id 0 is about the connection (the daemon is full, or
	// found the request malformed).
	if reply.id != req.id && (reply.typ != msgError || reply.id != 0) {
		return msg{}, fmt.Errorf("%w: reply %d to request %d", ErrProtocol, reply.id, req.id)
	}
	return reply, nil
}

func unexpected(m msg) error {
	if m.typ == msgError {
		return replyError(m)
	}
	return fmt.Errorf("%w: unexpected message type %d", ErrProtocol, m.typ)
}
