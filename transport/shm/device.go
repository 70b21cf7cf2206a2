package shm

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
	"github.com/rdmakit/rdmakit/verbs"
)

// Scheme is the URI scheme of shm devices.
const Scheme = "shm"

func init() { verbs.Register(provider{}) }

type provider struct{}

func (provider) Scheme() string { return Scheme }

// Defaults of the URI parameters.
const (
	// DefaultRing is the capacity of each ring of a connection.
	DefaultRing = 4 << 20
	// DefaultSpin is how long the NIC goroutine keeps polling after its
	// last piece of work before it sleeps on the device's bell.
	DefaultSpin = 20 * time.Microsecond
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Open opens shm://NAME: a device other processes on this host reach by
// NAME (an abstract Unix socket, @rdmakit-shm/NAME, carries the set-up;
// data moves through shared memory). Query parameters:
//
//	ring=BYTES        capacity of each ring of the connections this device
//	                  dials (power of two, default 4 MiB); the largest
//	                  message is a quarter of it
//	spin=D            how long the NIC goroutine polls after its last work
//	                  before it sleeps (default 20µs; 0 sleeps at once)
//	dial_timeout=D    connection set-up timeout (default 5s)
//	deposit=0|1       direct deposit of SENDs (default 1): this device
//	                  publishes its receive queues, and deposits its own
//	                  SENDs into peers' published queues; 0 sends every
//	                  SEND through the rings, for comparison
func (provider) Open(u *url.URL) (verbs.Device, error) {
	name := u.Host
	if !nameRE.MatchString(name) || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%w: want shm://NAME (letters, digits, . _ -), got %q", verbs.ErrBadURI, u.String())
	}
	opts := options{ring: DefaultRing, spin: DefaultSpin, dialTimeout: 5 * time.Second, deposit: true}
	q := u.Query()
	switch v := q.Get("deposit"); v {
	case "", "1":
	case "0":
		opts.deposit = false
	default:
		return nil, fmt.Errorf("%w: deposit=%q (0 or 1)", verbs.ErrBadURI, v)
	}
	if v := q.Get("ring"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 64<<10 || n > 1<<30 || n&(n-1) != 0 {
			return nil, fmt.Errorf("%w: ring=%q (a power of two from 65536 to 1073741824)", verbs.ErrBadURI, v)
		}
		opts.ring = n
	}
	for name, dst := range map[string]*time.Duration{"spin": &opts.spin, "dial_timeout": &opts.dialTimeout} {
		if v := q.Get(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || (d == 0 && name != "spin") {
				return nil, fmt.Errorf("%w: %s=%q", verbs.ErrBadURI, name, v)
			}
			*dst = d
		}
	}
	return open(name, opts)
}

type options struct {
	ring        int
	spin        time.Duration
	dialTimeout time.Duration
	deposit     bool // direct deposit of SENDs (depseg.go)
}

// socketName is the abstract Unix socket of device name.
func socketName(name string) string { return "@rdmakit-shm/" + name }

// device is a shm node: a nic.Node whose memory regions are memfds, its
// node segment, the connections peers made to it (sessions) and those it
// made (links), and the NIC goroutine that serves them when no
// application goroutine is polling.
type device struct {
	*nic.Node
	node      *nic.Node
	name      string
	opts      options
	ln        *net.UnixListener
	seg       *nodeSeg
	dep       *depSeg
	locks     *sharedLocks
	publisher *publisher
	maxMsg    int

	mu       sync.Mutex
	links    nic.LinkTable[*link] // the peers this device dialed, by address
	sessions map[*session]struct{}
	sessSnap atomic.Pointer[[]*session]
	peers    nic.PeerTable

	// drainMu is held shared by every drain; closing a connection takes it
	// exclusively before it unmaps the connection's rings.
	drainMu  sync.RWMutex
	polls    atomic.Uint64 // CQ.Poll calls that found nothing: an application polls
	idleAt   atomic.Uint64 // polls when a goroutine last went to block in CQ.Wait
	waiters  atomic.Int64  // goroutines blocked in CQ.Wait now
	kick     chan struct{}
	closed   atomic.Bool
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

func open(name string, opts options) (*device, error) {
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: socketName(name), Net: "unixpacket"})
	if err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, fmt.Errorf("%w: shm device %q is open in another process or device", verbs.ErrBusy, name)
		}
		return nil, fmt.Errorf("shm: listen %s: %w", socketName(name), err)
	}
	seg, err := newNodeSeg(name)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("%w: node segment: %v", verbs.ErrNoMemory, err)
	}
	dep, err := newDepSeg(name)
	if err != nil {
		ln.Close()
		seg.close()
		return nil, fmt.Errorf("%w: deposit segment: %v", verbs.ErrNoMemory, err)
	}
	d := &device{
		name:     name,
		opts:     opts,
		ln:       ln,
		seg:      seg,
		dep:      dep,
		maxMsg:   opts.ring / 4,
		sessions: map[*session]struct{}{},
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	d.publisher = newPublisher(seg, dep)
	d.locks = newSharedLocks(seg, d.publisher.resolve)
	var areas func(depth, maxSGE int) nic.RecvArea
	if opts.deposit {
		areas = d.newRecvArea
	}
	d.node = nic.NewNode(nic.Config{
		RecvAreas: areas,
		Address:   Scheme + "://" + name,
		Transport: Scheme,
		Network:   d,
		Attr:      verbs.DeviceAttr{MaxMsgSize: uint64(d.maxMsg), MTU: 4096},
		OnClose:   d.shutdown,
		MemFD:     true,
		Locks:     d.locks,
		Observer:  d.publisher,
		Progress:  d.progress,
		Idle:      d.idle,
		Awake:     d.awake,
		Quiesce:   d.quiesce,
	})
	d.Node = d.node
	d.sessSnap.Store(&[]*session{})
	d.wg.Add(3)
	go d.accept()
	go d.run()
	go d.watch()
	return d, nil
}

// progress serves this device's rings on an application goroutine that
// found its CQ empty (nic.Config.Progress).
func (d *device) progress() {
	d.polls.Add(1)
	d.drain()
}

// quiesce waits until no peer is inside a PRISM operation it began on
// this device's memory before the call (MR.Quiesce): a peer's active word
// that is odd must move. A peer that dies mid-operation closes its session,
// which ends the wait.
func (d *device) quiesce() {
	d.drainMu.RLock() // sessions' rings stay mapped meanwhile
	defer d.drainMu.RUnlock()
	for _, s := range *d.sessSnap.Load() {
		if s.closed.Load() {
			continue
		}
		w := atomic.LoadUint64(s.rings.active)
		for i := 0; w&1 == 1 && atomic.LoadUint64(s.rings.active) == w && !s.closed.Load(); i++ {
			if i < 64 {
				runtime.Gosched()
			} else {
				time.Sleep(5 * time.Microsecond)
			}
		}
	}
}

// idle hands progress to the NIC goroutine before an application
// goroutine blocks in CQ.Wait: until awake, the NIC goroutine drives the
// rings as when nobody polls.
func (d *device) idle() {
	d.waiters.Add(1)
	d.idleAt.Store(d.polls.Load())
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// awake is called when a goroutine leaves CQ.Wait.
func (d *device) awake() { d.waiters.Add(-1) }

// drain polls every ring once, and takes up the receive completions
// peers deposited when one signalled (depseg.go); it reports whether
// anything was done.
func (d *device) drain() bool {
	d.drainMu.RLock()
	did := false
	if p := d.dep.pending(); atomic.LoadUint32(p) != 0 {
		atomic.StoreUint32(p, 0) // before taking: a later deposit sets it again
		if d.node.TakeDeposits() {
			did = true
		}
	}
	for _, l := range d.links.Snapshot() {
		if l.poll() {
			did = true
		}
	}
	for _, s := range *d.sessSnap.Load() {
		if s.poll() {
			did = true
		}
	}
	d.drainMu.RUnlock()
	return did
}

// run is the NIC goroutine. It does the rings' work when no application
// goroutine does: while the application polls (the poll count moves) it
// only looks in every millisecond; otherwise it spins for opts.spin after
// its last work, then sleeps on the bell, which peers ring after they
// queue a request or a response. It also expires unanswered requests.
func (d *device) run() {
	defer d.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	lastPolls := d.polls.Load()
	lastExpire := time.Now()
	lastWork := time.Now()
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		now := time.Now()
		if now.Sub(lastExpire) >= nic.ExpireEvery {
			lastExpire = now
			d.node.Expire()
		}
		// The application polls if the count moved since the last look,
		// unless the last poll was the one before a CQ.Wait. While a
		// goroutine is blocked in CQ.Wait, the NIC goroutine drives the
		// rings whoever else polls: the others' polls may each find their
		// own completion and drive nothing (a GET blocked that way waited
		// for the look every ExpireEvery, in steps of 10 ms).
		if p := d.polls.Load(); p != lastPolls && p != d.idleAt.Load() && d.waiters.Load() == 0 {
			// An application goroutine polls and does the work: stay out
			// of its way (two busy goroutines starve a small machine).
			lastPolls = p
			if d.sleep(timer, nic.ExpireEvery) {
				// It is about to block: take over now.
				lastPolls = d.polls.Load()
				lastWork = time.Now()
			} else if d.drain() {
				// Applications poll, yet none may be driving the rings: a
				// poll that finds its own CQ non-empty does not, and a
				// drain that found another goroutine at a ring skipped
				// it. A look every ExpireEvery bounds what waits for
				// them (a GET parked in CQ.Wait waited for good).
				lastWork = time.Now()
			}
			continue
		}
		if d.drain() {
			lastWork = now
			continue
		}
		if now.Sub(lastWork) < d.opts.spin {
			runtime.Gosched()
			continue
		}
		bell := atomic.LoadUint32(d.seg.bell())
		atomic.StoreUint32(d.seg.parked(), 1)
		if d.drain() {
			atomic.StoreUint32(d.seg.parked(), 0)
			lastWork = time.Now()
			continue
		}
		_ = shmem.Wait(d.seg.bell(), bell, nic.ExpireEvery)
		atomic.StoreUint32(d.seg.parked(), 0)
		lastWork = time.Now()
		select {
		case <-d.kick:
		default:
		}
	}
}

// sleep waits for dur, a kick or the device's end; it reports a kick.
func (d *device) sleep(t *time.Timer, dur time.Duration) bool {
	t.Reset(dur)
	select {
	case <-t.C:
		return false
	case <-d.kick:
		t.Stop()
		return true
	case <-d.stop:
		t.Stop()
		return false
	}
}

// Resolve implements nic.Network: the device itself, or a link to the
// peer, dialed on first use.
func (d *device) Resolve(address string) (nic.Target, error) {
	if address == d.node.Address() {
		return d.node, nil
	}
	u, err := url.Parse(address)
	if err != nil || u.Scheme != Scheme || !nameRE.MatchString(u.Host) {
		return nil, fmt.Errorf("%w: %q is not a shm device address", verbs.ErrBadURI, address)
	}
	if d.closed.Load() {
		return nil, verbs.ErrClosed
	}
	l, err := d.links.Get(address, func() (*link, error) { return d.dial(address, u.Host) })
	if errors.Is(err, ErrRejected) || errors.Is(err, ErrProtocol) {
		return nil, err
	}
	if err != nil {
		// Unreachable now: as with ibverbs, connecting a QP succeeds and its
		// requests fail with RETRY_EXC_ERR. The next Resolve dials again.
		return d.deadLink(address, err), nil
	}
	return l, nil
}

// deadLink is a link to a device that cannot be reached.
func (d *device) deadLink(address string, err error) *link {
	l := &link{d: d, address: address}
	l.dead.Store(true)
	l.deadErr = err
	m := map[uint32]*mapping{}
	l.maps.Store(&m)
	l.once.Do(func() {})
	return l
}

func (d *device) snapSessionsLocked() {
	ss := make([]*session, 0, len(d.sessions))
	for s := range d.sessions {
		ss = append(ss, s)
	}
	d.sessSnap.Store(&ss)
}

// forget drops a failed link.
func (d *device) forget(l *link) { d.links.Forget(l.address, l) }

func (d *device) dropSession(s *session) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.sessions[s]; ok {
		delete(d.sessions, s)
		d.snapSessionsLocked()
		d.peers.Drop(s.peerID)
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

// Route implements nic.Network: shm injects no faults.
func (d *device) Route(*nic.Node, nic.Target) nic.Route { return nic.Route{} }

// shutdown runs when the device closes.
func (d *device) shutdown() { d.disconnect(verbs.ErrClosed) }

// disconnect stops the listener, the NIC goroutine, the sessions and the
// links.
func (d *device) disconnect(why error) {
	if d.closed.Swap(true) {
		return
	}
	d.ln.Close()
	d.stopOnce.Do(func() { close(d.stop) })
	links := d.links.Snapshot()
	d.mu.Lock()
	sessions := make([]*session, 0, len(d.sessions))
	for s := range d.sessions {
		sessions = append(sessions, s)
	}
	d.mu.Unlock()
	for _, l := range links {
		l.fail(why)
	}
	for _, s := range sessions {
		s.close(why)
	}
	d.wg.Wait()
	// The node segment stays mapped: a goroutine of this process may still
	// be inside an atomic on a lock stripe; the memory goes with the process.
}

// Crash simulates the death of a shm device's process: its QPs move to
// ERROR and flush into its CQs, and its connections close at once, so its
// peers' requests fail with RETRY_EXC_ERR. The device cannot be used
// afterwards except to poll and Close.
func Crash(dev verbs.Device) error {
	d, ok := dev.(*device)
	if !ok {
		return fmt.Errorf("%w: %T is not a shm device", verbs.ErrInvalidArg, dev)
	}
	d.node.Crash()
	d.disconnect(errors.New("device crashed"))
	return nil
}

// Stats returns the counters of a shm device's nic (requests it served
// for peers over the rings; one-sided operations peers ran directly on
// its memory, and SENDs they deposited, are not seen by it) and how many dead lock holders it
// recovered from.
func Stats(dev verbs.Device) (nic.Stats, int64, error) {
	d, ok := dev.(*device)
	if !ok {
		return nic.Stats{}, 0, fmt.Errorf("%w: %T is not a shm device", verbs.ErrInvalidArg, dev)
	}
	return d.node.Stats(), d.locks.recovered.Load(), nil
}

// Mapped reports whether dev maps the region rkey of the peer device at
// address: one-sided operations on it then run in this process, without
// the peer's CPU. Regions are mapped shortly after they are registered
// (or after the connection is made).
func Mapped(dev verbs.Device, address string, rkey uint32) bool {
	d, ok := dev.(*device)
	if !ok {
		return false
	}
	l, _ := d.links.Lookup(address)
	return l != nil && !l.Dead() && (*l.maps.Load())[rkey] != nil
}
