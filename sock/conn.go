package sock

import (
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Conn is a connection over remote-memory rings. It implements net.Conn
// with the semantics of a TCP connection: partial reads, io.EOF after the
// peer's Close or CloseWrite, deadlines, a reset error (ErrReset, which
// wraps syscall.ECONNRESET) when the peer resets or its process dies, and
// concurrent Read and Write.
type Conn struct {
	l           *link
	id, peer    connID
	part        *partition
	local, addr Addr

	rmu, wmu sync.Mutex // one Read and one Write at a time

	// Receive side, under rxMu (the RX poller delivers into it).
	rxMu        sync.Mutex
	rxq         byteRing
	rcvbuf      int
	granted     uint32 // the limit the peer was last given
	consumed    uint32 // bytes Read took
	finRecv     bool
	rstRecv     bool
	rstFlag     atomic.Bool // rstRecv, for checks without rxMu
	localClosed bool        // Close ran: drop data, reset the peer
	rstSent     bool
	freed       bool
	lingering   bool // closed, waiting for the peer's FIN: counted in l.sleepers
	rxSig       chan struct{}
	direct      []byte // a blocked Read's buffer: data goes straight in
	directN     int

	// Send side.
	sent    uint32        // bytes sent (mod 2^32), under wmu
	limit   atomic.Uint32 // the peer's latest credit
	sndbuf  int
	finSent atomic.Bool
	txSig   chan struct{}

	closed    chan struct{}
	isClosed  atomic.Bool // closed is closed: the fast check
	closeOnce sync.Once
	rd, wd    *deadline

	// SP2C / SPSC: the send queue the partition's TX goroutine drains.
	txq txQueue

	onFree func() // the control plane's Release, for accepted connections

	// Zero-copy API state.
	slot     []byte // WriteSlot's buffer, under wmu
	slotPad  int
	borrowed int // Borrow's length, under rmu
}

func newConn(l *link, id connID, rcvbuf int) *Conn {
	return &Conn{
		l: l, id: id, rcvbuf: rcvbuf, granted: uint32(rcvbuf),
		sndbuf: l.ep.cfg.WriteBuffer,
		rxSig:  make(chan struct{}, 1),
		txSig:  make(chan struct{}, 1),
		closed: make(chan struct{}),
		rd:     newDeadline(),
		wd:     newDeadline(),
	}
}

// established completes a connection once both ends know each other's ids.
func (c *Conn) established(peer connID, part int, peerRcvbuf uint32) {
	c.peer = peer
	c.part = c.l.parts[part]
	c.limit.Store(peerRcvbuf)
	c.local = c.l.ep.localAddr(c.l)
	c.addr = c.l.ep.remoteAddr(c.l)
	c.txq.init(c)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// deliver takes one record for this connection; the RX poller calls it.
func (c *Conn) deliver(h header, payload []byte) {
	c.rxMu.Lock()
	var rst, free bool
	switch h.kind {
	case kindData:
		switch {
		case c.localClosed || c.rstRecv:
			rst = !c.rstSent
		case c.rxq.len()+c.directN+len(payload) > int(int32(c.granted-c.consumed)):
			// More than the credit given: a peer that lies. Reset it.
			c.rstRecv = true
			c.rstFlag.Store(true)
			rst = !c.rstSent
		default:
			if k := len(c.direct) - c.directN; k > 0 && c.rxq.len() == 0 {
				k = copy(c.direct[c.directN:], payload)
				c.directN += k
				payload = payload[k:]
			}
			if len(payload) > 0 {
				c.rxq.write(payload)
			}
		}
	case kindFin:
		c.finRecv = true
	case kindRst:
		c.rstRecv = true
		c.rstFlag.Store(true)
	}
	if rst {
		c.rstSent = true
	}
	if c.localClosed && (c.finRecv || c.rstRecv || c.rstSent) && !c.freed {
		c.freed, free = true, true
		c.stopLingering()
	}
	c.rxMu.Unlock()
	if rst {
		// Never block the RX poller on the TX side.
		go c.part.sendControl(kindRst, c.peer)
	}
	if free {
		c.l.freeSlot(c.id)
	}
	signal(c.rxSig)
	if h.kind == kindRst {
		signal(c.txSig)
	}
}

// credit raises the send limit; the control ring's poller calls it.
func (c *Conn) credit(limit uint32) {
	for {
		old := c.limit.Load()
		if int32(limit-old) <= 0 || c.limit.CompareAndSwap(old, limit) {
			break
		}
	}
	signal(c.txSig)
	c.txq.kick()
}

// stopLingering ends a closed connection's doorbell request; the caller
// holds rxMu.
func (c *Conn) stopLingering() {
	if c.lingering {
		c.lingering = false
		c.l.sleepers.Add(-1)
	}
}

// linkFailed resets the connection: its link is gone.
func (c *Conn) linkFailed() {
	c.rxMu.Lock()
	c.rstRecv = true
	c.rstFlag.Store(true)
	c.freed = true
	c.stopLingering()
	c.rxMu.Unlock()
	signal(c.rxSig)
	signal(c.txSig)
	c.txq.kick()
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: c.local.Network(), Source: c.local, Addr: c.addr, Err: err}
}

// Read reads up to len(b) bytes that have arrived; it blocks until at
// least one has, the peer closes (io.EOF), the connection is reset
// (ErrReset), the read deadline passes (os.ErrDeadlineExceeded) or Close.
func (c *Conn) Read(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	var w waiter
	for {
		c.rxMu.Lock()
		n := c.directN
		c.direct, c.directN = nil, 0
		if n == 0 {
			n = c.rxq.read(b)
		}
		fin, rst := c.finRecv, c.rstRecv
		c.rxMu.Unlock()
		if err := c.consume(n); err != nil {
			return n, c.opErr("read", err)
		}
		switch {
		case c.isClosed.Load():
			return n, c.opErr("read", net.ErrClosed)
		case n > 0 || len(b) == 0:
			return n, nil
		case rst:
			return 0, c.opErr("read", c.l.failedOr(ErrReset))
		case fin:
			return 0, io.EOF
		case c.rd.passed():
			return 0, c.opErr("read", errTimeout)
		}
		c.awaitData(b, &w)
	}
}

// consume counts n bytes the application took and returns credit to the
// peer once a quarter of the window is free again.
func (c *Conn) consume(n int) error {
	if n == 0 {
		return nil
	}
	c.rxMu.Lock()
	c.consumed += uint32(n)
	give := false
	var grant uint32
	if int32(c.consumed+uint32(c.rcvbuf)-c.granted) >= int32(c.rcvbuf/4) {
		c.granted = c.consumed + uint32(c.rcvbuf)
		grant, give = c.granted, true
	}
	c.rxq.shrink(c.rcvbuf)
	c.rxMu.Unlock()
	if give {
		return c.l.ctrl.sendCredit(c.peer, grant)
	}
	return nil
}

// waiter is the state of one blocking wait: when it started spinning and
// how often it parked.
type waiter struct {
	start time.Time
	spins int
	parks int
}

// awaitData makes one step of waiting for data: poll the partition (Direct
// mode), spin, or park until a delivery, the deadline or Close. A
// non-nil b is armed for direct delivery.
func (c *Conn) awaitData(b []byte, w *waiter) {
	if b != nil {
		// Whoever delivers a record for this connection while Read
		// waits copies it straight into b.
		c.rxMu.Lock()
		if c.rxq.len() == 0 {
			c.direct = b
		}
		c.rxMu.Unlock()
	}
	if c.l.ep.cfg.Mode == Direct && c.part.tryPoll(64) > 0 {
		return
	}
	if w.start.IsZero() {
		w.start = time.Now()
	}
	if w.spins++; w.spins%16 != 0 || time.Since(w.start) < time.Duration(c.l.spin) {
		runtime.Gosched()
		return
	}
	if c.readable() {
		return
	}
	// The caller's next round takes what was delivered and says why the
	// wait ended.
	c.l.parkRemote(c.rxSig, c.rd, c.closed, w.parks, func() bool {
		if c.l.ep.cfg.Mode == Direct {
			c.part.rxMu.Lock()
			c.part.pollRX(1 << 30)
			c.part.rxMu.Unlock()
		}
		return c.readable()
	})
	w.parks++
}

// readable reports whether Read has something to return.
func (c *Conn) readable() bool {
	c.rxMu.Lock()
	defer c.rxMu.Unlock()
	return c.rxq.len() > 0 || c.finRecv || c.rstRecv
}

// writeErr is why the connection cannot send, or nil.
func (c *Conn) writeErr() error {
	if c.isClosed.Load() {
		return net.ErrClosed
	}
	if c.finSent.Load() {
		return syscall.EPIPE
	}
	if c.rstFlag.Load() {
		return c.l.failedOr(ErrReset)
	}
	if c.wd.passed() {
		return errTimeout
	}
	return nil
}

// Write sends b; it blocks while the peer's receive window is full (flow
// control) and returns when every byte is in the peer's ring (Direct) or
// in the send queue (SP2C, SPSC), or with the count sent and an error.
func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.l.ep.cfg.Mode != Direct {
		n, err := c.txq.enqueue(b)
		if err != nil {
			return n, c.opErr("write", err)
		}
		return n, nil
	}
	total := 0
	for len(b) > 0 {
		if err := c.writeErr(); err != nil {
			return total, c.opErr("write", err)
		}
		if c.avail() <= 0 {
			if err := c.waitCredit(); err != nil {
				return total, c.opErr("write", err)
			}
			continue
		}
		if !c.part.lock(c.closed, nil) {
			continue // closed or the link failed: writeErr says which
		}
		n, err := c.sendBatch(b, nil)
		c.part.unlock()
		c.l.ctrl.ringIfAsleep()
		total += n
		b = b[n:]
		if err != nil {
			return total, c.opErr("write", err)
		}
		if len(b) > 0 {
			// A turn's worth sent and more to go: let this process's
			// other goroutines (a latency-sensitive connection's reader
			// or writer, the doorbell loop) have the P before the next
			// turn, as the batch limit lets other connections have the
			// partition.
			runtime.Gosched()
		}
	}
	return total, nil
}

// avail is the credit left: bytes the peer can still take.
func (c *Conn) avail() int { return int(int32(c.limit.Load() - c.sent)) }

// sendBatch sends records of a (then b) for one turn on the partition (at
// most the batch limit of records); the caller holds the partition. It
// returns the bytes sent.
func (c *Conn) sendBatch(a, b []byte) (int, error) {
	total := 0
	for k := 0; len(a)+len(b) > 0 && (c.l.batch <= 0 || k < c.l.batch); k++ {
		n := min(len(a)+len(b), c.l.slice, c.avail())
		if n <= 0 {
			break
		}
		pad, err := c.part.waitRoom(recordSize(n), c.wd, c.closed)
		if err != nil {
			return total, err
		}
		x := a[:min(n, len(a))]
		y := b[:n-len(x)]
		if err := c.part.post(header{n: n, kind: kindData, id: c.peer}, pad, x, y); err != nil {
			return total, err
		}
		c.sent += uint32(n)
		total += n
		a = a[len(x):]
		b = b[len(y):]
	}
	return total, nil
}

// waitCredit waits until the peer grants credit.
func (c *Conn) waitCredit() error {
	start := time.Now()
	parks := 0
	for i := 0; ; i++ {
		c.l.ctrl.pollCredits()
		if c.avail() > 0 {
			return nil
		}
		if err := c.writeErr(); err != nil {
			return err
		}
		if time.Since(start) < time.Duration(c.l.spin) {
			runtime.Gosched()
			continue
		}
		if err := c.l.parkRemote(c.txSig, c.wd, c.closed, parks, func() bool {
			c.l.ctrl.pollCredits()
			return c.avail() > 0
		}); err != nil {
			return err
		}
		parks++
	}
}

// CloseWrite sends FIN after the data written so far: the peer's Read
// returns io.EOF once it has read it all. Reading goes on.
func (c *Conn) CloseWrite() error {
	if c.isClosed.Load() {
		return c.opErr("close", net.ErrClosed)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.finSent.Swap(true) {
		return nil
	}
	if err := c.txq.finish(); err != nil {
		return c.opErr("close", err)
	}
	return nil
}

// Close closes the connection: blocked Reads and Writes return, the peer
// reads io.EOF after the data sent so far — or, if data the application
// never read is left here, the peer gets a reset, as with TCP.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.isClosed.Store(true)
		close(c.closed)
	})
	if !first {
		return c.opErr("close", net.ErrClosed)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.rxMu.Lock()
	c.localClosed = true
	unread := c.rxq.len() > 0
	rst := !c.rstRecv && !c.rstSent && unread
	fin := !c.rstRecv && !c.rstSent && !unread && !c.finSent.Load()
	if rst {
		c.rstSent = true
	}
	free := !c.freed && (c.finRecv || c.rstRecv || c.rstSent)
	if free {
		c.freed = true
	}
	// Until the peer's FIN or RST arrives the slot stays taken, and
	// nobody may be polling this side's rings (no Read is left): keep the
	// peer's doorbell requested so that its FIN is taken when it comes.
	linger := !c.freed
	if linger {
		c.lingering = true
		c.l.sleepers.Add(1)
	}
	c.rxq = byteRing{}
	c.rxMu.Unlock()
	if !c.l.alive() {
		return nil
	}
	if linger && c.l.ctrl.announceSleep() == nil {
		// The FIN may have come before the request: look once.
		c.part.rxMu.Lock()
		c.part.pollRX(1 << 30)
		c.part.rxMu.Unlock()
	}
	switch {
	case rst:
		c.part.sendControlSoon(kindRst, c.peer)
	case fin:
		c.finSent.Store(true)
		if c.l.ep.cfg.Mode == Direct {
			c.part.sendControlSoon(kindFin, c.peer)
		} else {
			c.txq.finish() // queued behind the send queue; never blocks
		}
	}
	if free {
		c.l.freeSlot(c.id)
	}
	c.txq.stop()
	return nil
}

// LocalAddr returns this end's address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.addr }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

// SetReadDeadline sets the deadline of Read; a zero time means none.
func (c *Conn) SetReadDeadline(t time.Time) error { c.rd.set(t); return nil }

// SetWriteDeadline sets the deadline of Write; a zero time means none.
func (c *Conn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// SetReadBuffer sets the receive window: the bytes the peer may send ahead
// of Read. A larger window takes effect at once; a smaller one as Read
// consumes what the larger one let in.
func (c *Conn) SetReadBuffer(bytes int) error {
	if bytes <= 0 || bytes > 1<<30 {
		return c.opErr("set", syscall.EINVAL)
	}
	c.rxMu.Lock()
	c.rcvbuf = bytes
	var grant uint32
	give := false
	if int32(c.consumed+uint32(bytes)-c.granted) > 0 {
		c.granted = c.consumed + uint32(bytes)
		grant, give = c.granted, true
	}
	c.rxMu.Unlock()
	if give {
		if err := c.l.ctrl.sendCredit(c.peer, grant); err != nil {
			return c.opErr("set", err)
		}
	}
	return nil
}

// SetWriteBuffer sets the send queue of SP2C and SPSC connections (the
// bytes Write may queue before it blocks); Direct connections have none.
func (c *Conn) SetWriteBuffer(bytes int) error {
	if bytes <= 0 || bytes > 1<<30 {
		return c.opErr("set", syscall.EINVAL)
	}
	if c.txq.needsGrow(bytes) {
		// A larger ring: wait for a Write in progress to finish.
		c.wmu.Lock()
		defer c.wmu.Unlock()
	}
	if err := c.txq.setLimit(bytes); err != nil {
		return c.opErr("set", err)
	}
	return nil
}

// Partition returns the index of the partition the connection rides.
func (c *Conn) Partition() int { return c.part.idx }
