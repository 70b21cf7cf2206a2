package tcp

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/nic"
)

// maxPending bounds the bytes queued on a link and not yet written: a
// poster whose flush finds more waits for the network (back-pressure).
const maxPending = 4 << 20

// link is a connection this device dialed to another node: its requests
// go out on it and the responses come back on it. It implements nic.Link.
type link struct {
	dev     *device
	address string // the peer's device address
	conn    net.Conn
	w       io.Writer // a quietConn on conn's socket; nil: conn (tests)

	mu      sync.Mutex
	cond    sync.Cond
	out     []byte
	spare   []byte
	writing bool
	queued  int64 // requests in out, not yet written
	// flushers counts the Flush calls that found requests queued since
	// the last write; shared is a saturating count of recent writes that
	// carried more than one flusher's requests: evidence of concurrent
	// posters, the only ones a yield before the write can batch.
	flushers int
	shared   int
	probe    int // flushes with requests on the wire and no evidence (probeEvery)
	dead     bool
	err      error

	// Liveness (Progressed): lastRecv is when bytes from the peer last
	// arrived (unix nanoseconds), lastBulk when the socket last took a
	// whole writeChunk of requests. Smaller writes — PINGs, small
	// requests — prove nothing: the kernel buffers them whether or not the
	// peer runs.
	lastRecv atomic.Int64
	lastBulk atomic.Int64
	// resps counts the RESPONSE frames taken. A link silent for a retry
	// budget gets one grace of another budget per response taken (see
	// Progressed): a responder starved of CPU for a while is slow, not
	// dead.
	resps   atomic.Uint64
	graceMu sync.Mutex
	grace   nic.SilenceGrace
	// emptyAt is when a progress read last found nothing (nanotime): the
	// next ones wait emptyWait, so that many CQ pollers do not each pay a
	// read syscall for nothing; the link's goroutine still reads as soon
	// as the socket is readable.
	emptyAt atomic.Int64
	done    chan struct{}

	// Reading: whoever holds tok reads the socket without blocking — the
	// link's own goroutine after the poller wakes it, or an application
	// goroutine polling a CQ (progress). missed asks the holder to read
	// once more before letting go.
	raw    *rawReader
	fr     *frameReader
	tok    atomic.Int32
	missed atomic.Bool
	// parked says the link's goroutine waits in read for the holder of
	// tok to let go; released is how the holder tells it (one slot).
	parked   atomic.Bool
	released chan struct{}
	pending  atomic.Int64 // requests appended and not yet answered
	resp     nic.Response
}

var _ nic.Link = (*link)(nil)

// dial connects to the device at address (tcp://host:port) and performs
// the handshake.
func dial(d *device, address, hostport string) (*link, error) {
	c, err := net.DialTimeout("tcp", hostport, d.opts.dialTimeout)
	if err != nil {
		return nil, fmt.Errorf("tcp: dial %s: %w", address, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c.SetDeadline(time.Now().Add(d.opts.dialTimeout))
	msg := appendHello(nil, &hello{version: Version, address: d.node.Address(), token: d.opts.token})
	if _, err := c.Write(msg); err != nil {
		c.Close()
		return nil, fmt.Errorf("tcp: handshake with %s: %w", address, err)
	}
	fr := newFrameReader(c, 64<<10, maxFrame)
	typ, body, err := fr.next()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("tcp: handshake with %s: %w", address, err)
	}
	switch typ {
	case frameWelcome:
		w, err := decodeWelcome(body)
		if err != nil {
			c.Close()
			return nil, err
		}
		if w.version != Version {
			c.Close()
			return nil, fmt.Errorf("%w: %s speaks version %d", ErrProtocol, address, w.version)
		}
	case frameReject:
		code, reason, _ := decodeReject(body)
		c.Close()
		return nil, fmt.Errorf("%w by %s: %s (code %d)", ErrRejected, address, reason, code)
	default:
		c.Close()
		return nil, fmt.Errorf("%w: %s answered the hello with frame type %d", ErrProtocol, address, typ)
	}
	c.SetDeadline(time.Time{})
	raw, err := newRawReader(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	fr.r = raw
	l := &link{dev: d, address: address, conn: c, done: make(chan struct{}), raw: raw, fr: fr,
		released: make(chan struct{}, 1)}
	if q, err := newQuietConn(c); err == nil {
		l.w = q
	}
	l.cond.L = &l.mu
	l.lastRecv.Store(time.Now().UnixNano())
	go l.read()
	return l, nil
}

// deadLink is a link to a peer that could not be reached: every request
// on it fails with RETRY_EXC_ERR.
func deadLink(d *device, address string, err error) *link {
	l := &link{dev: d, address: address, dead: true, err: err, done: make(chan struct{})}
	l.cond.L = &l.mu
	close(l.done)
	return l
}

// Address implements nic.Link.
func (l *link) Address() string { return l.address }

// Append implements nic.Link: it encodes the request into the pending
// buffer; it never blocks on the network.
func (l *link) Append(r *nic.Request) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead {
		return l.err
	}
	if len(l.out) >= maxPending {
		return nic.ErrLinkFull
	}
	l.out = appendRequest(l.out, r)
	if !r.Datagram {
		l.pending.Add(1)
		l.queued++
	}
	return nil
}

// Flush implements nic.Link: the first caller to find no write in
// progress writes everything pending (its own requests and whatever other
// posters queued meanwhile); the others return at once. A caller waits
// only while more than maxPending bytes are queued.
func (l *link) Flush() error {
	for l.dev.blocked(l.address) {
		// A fault holds the traffic: leave it queued (the fault's end
		// flushes it) and hold the poster back only when the queue is full.
		l.mu.Lock()
		full := len(l.out) >= maxPending && !l.dead
		l.mu.Unlock()
		if !full {
			return nil
		}
		l.dev.waitOpen(l.address)
	}
	// With requests of earlier posts on the wire and other goroutines
	// posting on this link lately (concurrent posters), let the goroutines
	// that are ready to post append their requests first: one yield, and
	// they share this write, the software doorbell batching of requests
	// from many tasks. A lone request is written at once, and so is a
	// lone poster's: its earlier requests are on the wire only because
	// their answers have not been read yet, and a yield would put reading
	// them (or whatever else is runnable) before this request — for a
	// service that answers a SEND with a SEND, the answer's whole wait.
	// Without recent evidence either way, every probeEvery-th poster
	// with requests on the wire yields anyway: concurrent posters can
	// only show themselves by sharing a write, and if no poster ever
	// yielded none would (sequencer clients lost 40% of their rate).
	l.mu.Lock()
	onWire := l.pending.Load() - l.queued
	if len(l.out) > 0 {
		l.flushers++
	}
	yield := onWire > 0 && l.shared > 0
	if onWire > 0 && l.shared == 0 {
		l.probe++
		yield = l.probe%probeEvery == 0
	}
	l.mu.Unlock()
	if yield {
		runtime.Gosched()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.writing && len(l.out) > 0 && !l.dead {
		l.writing = true
		buf := l.out
		l.out = l.spare[:0]
		l.dev.batching.add(l.queued)
		l.queued = 0
		if l.flushers > 1 {
			l.shared = min(l.shared+1, sharedMemory)
		} else if l.shared > 0 {
			l.shared--
		}
		l.flushers = 0
		l.mu.Unlock()
		err := l.write(buf)
		l.mu.Lock()
		l.spare = buf[:0]
		l.writing = false
		l.cond.Broadcast()
		if err != nil {
			l.mu.Unlock()
			l.fail(err)
			l.mu.Lock()
		}
	}
	for len(l.out) >= maxPending && !l.dead {
		l.cond.Wait()
	}
	return l.err
}

// sharedMemory is how many writes of a single poster's requests it takes
// to stop yielding after writes that carried several posters' requests.
const sharedMemory = 8

// probeEvery is how often a poster that has no evidence of others yields
// before writing anyway, to find out: a lone poster pays one yield in
// probeEvery writes.
const probeEvery = 2

// writeChunk is how much a flush writes between progress marks.
const writeChunk = 256 << 10

// write writes buf in chunks, marking progress after each whole one: a
// large WRITE to a responder that reads slowly is not a lost one. The
// socket buffers only a few chunks for a peer that does not read, so a
// stopped peer stops this progress soon.
func (l *link) write(buf []byte) error {
	var w io.Writer = l.conn
	if l.w != nil {
		w = l.w
	}
	for len(buf) > 0 {
		k := min(len(buf), writeChunk)
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		if k == writeChunk {
			l.lastBulk.Store(time.Now().UnixNano())
		}
		buf = buf[k:]
	}
	return nil
}

// Progressed implements nic.Link: whether bytes arrived from the peer, or
// the socket took a whole chunk of requests, within d — or the link is in
// its grace. The first time a link is found silent for d after a RESPONSE
// arrived (or ever), it gets d more: a responder process starved of CPU on
// a loaded machine (or this process's reader) can be silent for a retry
// budget and still be alive, and its answer is then on its way. A stopped
// peer is detected after twice the budget; a peer that answers PINGs but
// drops the requests (tenant isolation) takes no response, so it gets no
// second grace and its requests still fail.
func (l *link) Progressed(d time.Duration) bool {
	now := time.Now().UnixNano()
	if now-l.lastRecv.Load() < int64(d) || now-l.lastBulk.Load() < int64(d) {
		return true
	}
	l.graceMu.Lock()
	defer l.graceMu.Unlock()
	return l.grace.Alive(time.Unix(0, now), d, l.resps.Load())
}

// send queues and flushes a control frame.
func (l *link) send(b []byte) {
	l.mu.Lock()
	if !l.dead {
		l.out = append(l.out, b...)
	}
	l.mu.Unlock()
	l.Flush()
}

// read is the link's goroutine: it parks until the socket is readable,
// then reads what an application goroutine has not already read.
func (l *link) read() {
	for {
		l.dev.waitOpen(l.address) // a fault holds the answers too
		got := l.tok.CompareAndSwap(0, 1)
		if !got {
			// Ask the holder to read once more, then check again: either it
			// sees the request as it lets go, or it has let go already.
			l.parked.Store(true)
			l.missed.Store(true)
			got = l.tok.CompareAndSwap(0, 1)
		}
		if got {
			l.parked.Store(false)
			if err := l.drain(); err != nil {
				l.tok.Store(0)
				l.fail(err)
				return
			}
			if err := l.release(); err != nil {
				l.fail(err)
				return
			}
		} else {
			// The holder reads what is there; wait until it lets go rather
			// than poll a socket that stays readable until then. Spinning
			// here took the CPU from a holder the kernel had preempted (on
			// a loaded machine, for milliseconds).
			select {
			case <-l.released:
			case <-l.done:
				return
			}
		}
		if l.Dead() {
			return
		}
		if err := l.raw.waitReadable(); err != nil {
			l.fail(err)
			return
		}
	}
}

// poll reads whatever has arrived, on the caller's goroutine, if the link
// waits for answers and nobody else is reading. It is the progress an
// application drives by polling its CQ.
func (l *link) poll() {
	if l.pending.Load() <= 0 || l.tok.Load() != 0 {
		return // nothing awaited, or another goroutine reads (before the clock: pollers call this in a loop)
	}
	now := nanotime()
	if now-l.emptyAt.Load() < emptyWait || !l.tok.CompareAndSwap(0, 1) {
		return
	}
	before := l.lastRecv.Load()
	err := l.drain()
	if err == nil && l.lastRecv.Load() == before {
		l.emptyAt.Store(now)
	}
	if err == nil {
		err = l.release()
	} else {
		l.tok.Store(0)
	}
	if err != nil {
		l.fail(err)
	}
}

// release gives up the read token, first reading again for a goroutine
// that found it taken meanwhile.
func (l *link) release() error {
	for {
		l.tok.Store(0)
		if !l.missed.Swap(false) || !l.tok.CompareAndSwap(0, 1) {
			l.wake()
			return nil
		}
		if err := l.drain(); err != nil {
			l.tok.Store(0)
			return err
		}
	}
}

// wake tells the link's goroutine, if it waits for tok, that tok was let
// go. A stale wake-up costs it one more look at the socket.
func (l *link) wake() {
	if l.parked.Swap(false) {
		select {
		case l.released <- struct{}{}:
		default:
		}
	}
}

// drain handles every complete frame available without blocking; the
// caller holds tok.
func (l *link) drain() error {
	before := l.fr.received
	err := l.handleFrames()
	if l.fr.received != before { // one clock reading per batch of bytes
		l.lastRecv.Store(time.Now().UnixNano())
	}
	return err
}

// handleFrames handles the complete frames available; the caller holds
// tok.
func (l *link) handleFrames() error {
	for {
		typ, body, err := l.fr.next()
		if err == errAgain {
			return nil
		}
		if err != nil {
			return err
		}
		switch typ {
		case frameResp:
			if err := decodeResponse(body, &l.resp); err != nil {
				return err
			}
			l.pending.Add(-1)
			l.resps.Add(1)
			l.dev.node.HandleResponse(l, &l.resp)
		case framePong:
		default:
			return fmt.Errorf("%w: frame type %d from %s", ErrProtocol, typ, l.address)
		}
	}
}

// fail closes the link once: every QP behind it fails its outstanding
// requests with RETRY_EXC_ERR, and the device forgets it so the next
// connection to the peer dials anew.
func (l *link) fail(err error) {
	l.mu.Lock()
	if l.dead {
		l.mu.Unlock()
		return
	}
	l.dead = true
	l.err = fmt.Errorf("tcp: link to %s: %w", l.address, err)
	l.cond.Broadcast()
	l.mu.Unlock()
	close(l.done)
	l.conn.Close()
	l.dev.forget(l)
	if !l.dev.closed.Load() {
		slog.Debug("tcp link down", "peer", l.address, "err", err)
	}
	l.dev.node.LinkDown(l)
}

// Dead reports whether the link failed (nic.DialedLink).
func (l *link) Dead() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dead
}

// emptyWait is how long progress reads pause after one found nothing.
const emptyWait = int64(20 * time.Microsecond)

// nanotime is a monotonic clock in nanoseconds.
func nanotime() int64 { return int64(time.Since(clockBase)) }

var clockBase = time.Now()
