// Package tcp is rdmakit's cross-host transport: a soft NIC at every node
// executes the one-sided operations and deliveries its peers send over TCP,
// without the application's goroutines (the design of PRISM's software
// prototype and of Google's Snap). Devices are tcp://HOST:PORT; the wire
// protocol is specified in docs/wire.md.
package tcp

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// Scheme is the URI scheme of tcp devices.
const Scheme = "tcp"

func init() { verbs.Register(provider{}) }

type provider struct{}

func (provider) Scheme() string { return Scheme }

// Open opens tcp://HOST:PORT: a device whose soft NIC listens on
// HOST:PORT (port 0 picks a free one; Address() reports it). Query
// parameters:
//
//	token=SECRET      shared auth token: peers must present the same one
//	advertise=H:P     the address peers should dial, when HOST is 0.0.0.0
//	dial_timeout=D    connection and handshake timeout (default 5s)
//	keepalive=D       ping interval on idle links (default 1s); a link
//	                  silent for 5 intervals is declared dead, and so is a
//	                  served connection whose peer reads no reply or sends
//	                  no byte of a started large frame for as long
//	membudget=N       node-wide bytes the served connections may hold in
//	                  frames larger than their 64 KiB buffers (requests
//	                  arriving, READ replies being written); a connection
//	                  waits for its share (default 256MiB, at least 17MiB;
//	                  KiB, MiB and GiB suffixes)
//	maxconns=N        connections served at once (default 4096); more are
//	                  refused with REJECT code 4
//	memfd=1           back memory regions with memfds other processes can
//	                  map (nic.MR.FD), e.g. for inspection by a test
//	spin=D            how long the soft NIC keeps polling a connection after
//	                  its last request before it parks (default 50µs; 0
//	                  parks at once); it yields after every empty read, so
//	                  a goroutine a request woke runs at once, and it does
//	                  not spin while the node awaits answers to requests
//	                  of its own posted in the last 2 ms
//	doorbell=wr       one write system call per work request instead of one
//	                  per post list (doorbell=list, the default): the
//	                  no-batching side of the guideline, for comparison
func (provider) Open(u *url.URL) (verbs.Device, error) {
	if u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%w: want tcp://HOST:PORT, got %q", verbs.ErrBadURI, u.String())
	}
	opts := options{dialTimeout: 5 * time.Second, keepalive: time.Second, spin: DefaultSpin}
	q := u.Query()
	if v := q.Get("membudget"); v != "" {
		n, err := parseBytes(v)
		if err != nil || n < maxFrame {
			return nil, fmt.Errorf("%w: membudget=%q (at least %d bytes, one maximal frame)", verbs.ErrBadURI, v, maxFrame)
		}
		opts.memBudget = n
	}
	if v := q.Get("maxconns"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: maxconns=%q", verbs.ErrBadURI, v)
		}
		opts.maxConns = n
	}
	opts.token = q.Get("token")
	switch q.Get("doorbell") {
	case "", "list":
	case "wr":
		opts.doorbellPerWR = true
	default:
		return nil, fmt.Errorf("%w: doorbell=%q (list or wr)", verbs.ErrBadURI, q.Get("doorbell"))
	}
	switch q.Get("memfd") {
	case "", "0", "false":
	case "1", "true":
		opts.memfd = true
	default:
		return nil, fmt.Errorf("%w: memfd=%q", verbs.ErrBadURI, q.Get("memfd"))
	}
	for name, dst := range map[string]*time.Duration{"dial_timeout": &opts.dialTimeout, "keepalive": &opts.keepalive, "spin": &opts.spin} {
		if v := q.Get(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || (d == 0 && name != "spin") {
				return nil, fmt.Errorf("%w: %s=%q", verbs.ErrBadURI, name, v)
			}
			*dst = d
		}
	}
	return listen(u.Host, q.Get("advertise"), opts)
}

// DefaultSpin is how long a soft NIC keeps polling a quiet connection
// before it parks: long enough to catch the next request of a ping-pong
// client without the wake-up cost of an idle CPU.
const DefaultSpin = 50 * time.Microsecond

type options struct {
	doorbellPerWR bool
	wrapConn      func(net.Conn) net.Conn // tests: wraps accepted connections
	spin          time.Duration
	memfd         bool
	token         string
	dialTimeout   time.Duration
	keepalive     time.Duration
	memBudget     int64 // 0: DefaultMemBudget
	maxConns      int   // 0: DefaultMaxConns
}

// device is a tcp node: a nic.Node, the listener its soft NIC serves on,
// and the links it dialed.
type device struct {
	*nic.Node
	node *nic.Node
	opts options
	ln   net.Listener

	mu    sync.Mutex
	links nic.LinkTable[*link] // the peers this device dialed, by address
	peers nic.PeerTable        // accepted peers by id: their device address
	conns map[net.Conn]struct{}

	budget   *budget
	closed   atomic.Bool
	refused  atomic.Int64
	batching writeStats // requests per write on the links it dialed
	wg       sync.WaitGroup
	stop     chan struct{}
	stopOnce sync.Once
	faults   faults
}

func listen(hostport, advertise string, opts options) (*device, error) {
	ln, err := net.Listen("tcp", hostport)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen %s: %w", hostport, err)
	}
	adv := ln.Addr().String()
	if advertise != "" {
		if _, _, err := net.SplitHostPort(advertise); err != nil {
			ln.Close()
			return nil, fmt.Errorf("%w: advertise=%q", verbs.ErrBadURI, advertise)
		}
		adv = advertise
	} else if h, p, _ := net.SplitHostPort(adv); net.ParseIP(h).IsUnspecified() {
		adv = net.JoinHostPort("127.0.0.1", p)
	}
	if opts.memBudget == 0 {
		opts.memBudget = DefaultMemBudget
	}
	if opts.maxConns == 0 {
		opts.maxConns = DefaultMaxConns
	}
	d := &device{
		budget: newBudget(opts.memBudget),
		opts:   opts,
		ln:     ln,
		conns:  map[net.Conn]struct{}{},
		stop:   make(chan struct{}),
	}
	d.node = nic.NewNode(nic.Config{
		Address:   Scheme + "://" + adv,
		ID:        0,
		Transport: Scheme,
		Network:   d,
		Attr:      verbs.DeviceAttr{MaxMsgSize: MaxMessage, MTU: 4096},
		OnClose:   d.shutdown,
		MemFD:     opts.memfd,
		Progress:  d.progress,

		DoorbellPerWR: opts.doorbellPerWR,
	})
	d.Node = d.node
	d.wg.Add(2)
	go d.accept()
	go d.tick()
	return d, nil
}

// Refused counts connections the device refused (bad hello, token,
// version, a malformed frame, one beyond maxconns, a large frame stalled).
func (d *device) Refused() int64 { return d.refused.Load() }

// Resolve implements nic.Network: the device itself, or a link to the
// peer, dialed on first use.
func (d *device) Resolve(address string) (nic.Target, error) {
	if address == d.node.Address() {
		return d.node, nil
	}
	u, err := url.Parse(address)
	if err != nil || u.Scheme != Scheme || u.Host == "" {
		return nil, fmt.Errorf("%w: %q is not a tcp device address", verbs.ErrBadURI, address)
	}
	if d.closed.Load() {
		return nil, verbs.ErrClosed
	}
	l, err := d.links.Get(address, func() (*link, error) { return dial(d, address, u.Host) })
	if errors.Is(err, ErrRejected) || errors.Is(err, ErrProtocol) {
		return nil, err
	}
	if err != nil {
		// Unreachable now: as with ibverbs, connecting a QP succeeds and its
		// requests fail with RETRY_EXC_ERR. The next Resolve dials again.
		return deadLink(d, address, err), nil
	}
	return l, nil
}

// progress reads the answers that have arrived on every link, on the
// calling goroutine (nic.Config.Progress).
func (d *device) progress() {
	for _, l := range d.links.Snapshot() {
		if !d.blocked(l.address) {
			l.poll()
		}
	}
}

// ResolveID implements nic.Network: the peer that sent a receive.
func (d *device) ResolveID(id uint32) (nic.Target, error) {
	a, err := d.peers.Address(id)
	if err != nil {
		return nil, err
	}
	return d.Resolve(a)
}

// Route implements nic.Network. TCP injects no faults: a path is up.
func (d *device) Route(*nic.Node, nic.Target) nic.Route { return nic.Route{} }

// forget drops a failed link.
func (d *device) forget(l *link) { d.links.Forget(l.address, l) }

// What track found.
const (
	tracked = iota
	trackClosed
	trackFull // maxconns connections are served already
)

// track registers a served connection, unless the device is closed or
// serves as many as it may.
func (d *device) track(c net.Conn) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return trackClosed
	}
	if len(d.conns) >= d.opts.maxConns {
		return trackFull
	}
	d.conns[c] = struct{}{}
	return tracked
}

func (d *device) untrack(c net.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.conns, c)
}

// tick expires unanswered requests and keeps idle links alive.
func (d *device) tick() {
	defer d.wg.Done()
	t := time.NewTicker(nic.ExpireEvery)
	defer t.Stop()
	var nonce uint64
	lastPing := time.Now()
	for {
		select {
		case <-d.stop:
			return
		case now := <-t.C:
			d.node.Expire()
			if now.Sub(lastPing) < d.opts.keepalive {
				continue
			}
			lastPing = now
			for _, l := range d.links.Snapshot() {
				if now.UnixNano()-l.lastRecv.Load() > int64(5*d.opts.keepalive) {
					l.fail(fmt.Errorf("no answer for %v", 5*d.opts.keepalive))
					continue
				}
				nonce++
				l.send(appendPing(nil, framePing, nonce))
			}
		}
	}
}

// shutdown runs when the device closes: the listener, the links and the
// served connections close.
func (d *device) shutdown() {
	d.disconnect(verbs.ErrClosed)
	d.stopOnce.Do(func() { close(d.stop) })
	d.wg.Wait()
}

// disconnect closes the listener, the served connections and the links,
// failing the links with why.
func (d *device) disconnect(why error) {
	d.closed.Store(true)
	d.releaseFaults()
	d.budget.close()
	d.ln.Close()
	d.mu.Lock()
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	for _, l := range d.links.Snapshot() {
		l.fail(why)
	}
}

// Crash simulates the death of a tcp device's process: its QPs move to
// ERROR and flush into its CQs (which stay pollable), and its listener,
// links and served connections close at once, so its peers' requests fail
// with RETRY_EXC_ERR. The device cannot be used afterwards except to poll
// and Close.
func Crash(dev verbs.Device) error {
	d, err := asDevice(dev)
	if err != nil {
		return err
	}
	d.node.Crash()
	d.disconnect(errors.New("device crashed"))
	return nil
}

// Stats returns the counters of a tcp device's soft NIC (see nic.Stats)
// and how many connections it refused.
func Stats(dev verbs.Device) (nic.Stats, int64, error) {
	d, ok := dev.(*device)
	if !ok {
		return nic.Stats{}, 0, fmt.Errorf("%w: %T is not a tcp device", verbs.ErrInvalidArg, dev)
	}
	return d.node.Stats(), d.refused.Load(), nil
}
