package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// MaxMessage bounds requests and responses, header included (default
	// DefaultMaxMessage, at least MinMessage); it must not exceed the
	// server's, and the server's handlers must answer within it.
	MaxMessage int
	// Slots is the number of calls in flight at once (default 64); it
	// must not exceed the server's Recvs.
	Slots int
	// Poll is how the client's poller waits (default adaptive).
	Poll verbs.PollPolicy
	// Herd sends requests HERD-style: a WRITE into the server's request
	// region, which the server polls, instead of a SEND into a posted
	// receive. Responses come back by SEND either way.
	Herd bool
	// Inline posts HERD request WRITEs of up to this many bytes (header
	// included) inline; it must not exceed the QP's MaxInlineData. 0
	// posts them from the client's registered buffers.
	Inline int
	// Router routes the completions of the client's CQ. The client
	// registers its own handler on it and tags its wr_ids; requests that
	// others post on the client's QP (a store's one-sided READs, say)
	// carry tags of their own, and the client's poller (and Progress)
	// hands their completions to their handlers too. A handler's error
	// fails the connection, and with it every call and foreign request in
	// flight; so does any error completion of the client's own requests.
	// Nil: the client makes a router of its own (Client.Router).
	Router *verbs.Router
	// Probe is how long calls may wait with no completion at all before
	// the client checks that the server's end of the connection is still
	// there: a zero-length READ of the server QP's scratch area, which a
	// live responder always answers and a gone one (its QP destroyed, its
	// process dead) fails. A failed probe fails the connection, and with
	// it every call in flight, instead of leaving each to its caller's
	// deadline. A slow handler is not a dead server: its QP answers the
	// probe. Default DefaultProbe; negative turns probing off.
	Probe time.Duration
}

// DefaultProbe is ClientConfig.Probe's default.
const DefaultProbe = 500 * time.Millisecond

func (c *ClientConfig) defaults() {
	if c.MaxMessage <= 0 {
		c.MaxMessage = DefaultMaxMessage
	}
	if c.MaxMessage < MinMessage {
		c.MaxMessage = MinMessage
	}
	if c.Slots <= 0 {
		c.Slots = 64
	}
	if c.Poll == (verbs.PollPolicy{}) {
		c.Poll = verbs.PollAdaptive
	}
	if c.Probe == 0 {
		c.Probe = DefaultProbe
	}
}

// call is one slot's call in flight.
type call struct {
	gen  uint32
	resp []byte
	n    int
	err  error
	done chan struct{}
}

// Client makes calls over the SEND/RECV path of one connection. Calls are
// safe from any number of goroutines; at most Slots are in flight.
type Client struct {
	cfg     ClientConfig
	qp      verbs.QP
	cq      verbs.CQ
	mr      verbs.MR
	free    chan int
	mu      sync.Mutex
	calls   []call
	closed  atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{}
	router  *verbs.Router
	tag     verbs.Tag      // the client's own wr_ids carry it
	recvs   []verbs.RecvWR // receive i, reposted as it completes
	err     error
	errOnce sync.Once
	sent    atomic.Uint64 // SENDs posted: every 16th is signaled, to free send-queue slots
	seen    atomic.Uint64 // completions of the client's own requests and receives
	probing atomic.Bool   // a liveness probe is posted and not completed
	watched chan struct{} // closed when watch has returned
	life    sync.RWMutex  // calls hold it shared while they use the buffers; Close exclusively

	// Requests are posted by combining: concurrent callers' SENDs go
	// out as one list (one doorbell for all the callers waiting then).
	comb verbs.Combiner
	sgl  []verbs.SGE

	// HERD requests: the server's request region and, per slot, the
	// counter of the last request and the SGE of its closing word.
	herd     bool
	raddr    uint64
	rkey     uint32
	stride   int
	ctr      []uint32
	wordSGL  []verbs.SGE
	wordBase int
}

// NewClient starts a client on qp (connected, RTS) whose completions go
// to cq; pd registers its buffers. Close it when done.
func NewClient(pd verbs.PD, qp verbs.QP, cq verbs.CQ, cfg ClientConfig) (*Client, error) {
	cfg.defaults()
	// Receives: twice the slots, so an answer never finds the receive of
	// the previous one not yet re-posted (which would cost an RNR wait).
	// Buffers: the receives, then one send buffer per slot.
	n, size := cfg.Slots, cfg.MaxMessage
	// Then one closing word per slot for HERD requests.
	if cfg.Herd && (n > MaxHerdSlots || cfg.Inline < 0) {
		return nil, fmt.Errorf("%w: %d HERD slots (at most %d), inline %d", verbs.ErrInvalidArg, n, MaxHerdSlots, cfg.Inline)
	}
	mr, err := pd.AllocMR(3*n*size+8*n, verbs.AccessLocalWrite)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, qp: qp, cq: cq, mr: mr, free: make(chan int, n), calls: make([]call, n), done: make(chan struct{}),
		sgl: make([]verbs.SGE, n),
		ctr: make([]uint32, n), wordSGL: make([]verbs.SGE, n), wordBase: 3 * n * size}
	c.comb.Post, c.comb.Fail = c.post, c.failBatch
	c.router = cfg.Router
	if c.router == nil {
		c.router = new(verbs.Router)
	}
	if c.tag, err = c.router.Register(c.complete); err != nil {
		mr.Deregister()
		return nil, fmt.Errorf("rpc: %w", err)
	}
	c.recvs = make([]verbs.RecvWR, 2*n)
	for i := range c.recvs {
		c.recvs[i] = verbs.RecvWR{ID: c.tag.ID(uint64(i)), SGL: []verbs.SGE{c.recvSGE(i)}}
	}
	for i := 0; i < n; i++ {
		c.free <- i
		c.calls[i].done = make(chan struct{}, 1)
	}
	if err := qp.PostRecv(c.recvs); err != nil {
		c.router.Unregister(c.tag)
		mr.Deregister()
		return nil, err
	}
	var ctx context.Context
	ctx, c.cancel = context.WithCancel(context.Background())
	go c.poll(ctx)
	c.watched = make(chan struct{})
	if cfg.Probe > 0 {
		go c.watch(ctx)
	} else {
		close(c.watched)
	}
	if cfg.Herd {
		if err := c.openHerd(); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// herdOpenTimeout bounds the call that opens HERD requests.
const herdOpenTimeout = 10 * time.Second

// openHerd asks the server for a request region (a call over the SEND
// path) and switches the client's requests to WRITEs into it.
func (c *Client) openHerd() error {
	ctx, cancel := context.WithTimeout(context.Background(), herdOpenTimeout)
	defer cancel()
	var req [8]byte
	var resp [16]byte
	binary.LittleEndian.PutUint32(req[:], uint32(c.cfg.Slots))
	binary.LittleEndian.PutUint32(req[4:], uint32(c.cfg.MaxMessage))
	m, err := c.Call(ctx, MethodHerdOpen, req[:], resp[:])
	if err != nil {
		return fmt.Errorf("rpc: opening HERD requests: %w", err)
	}
	if m != len(resp) {
		return fmt.Errorf("rpc: opening HERD requests: a %d-byte answer: %w", m, verbs.ErrInvalidArg)
	}
	c.raddr = binary.LittleEndian.Uint64(resp[:])
	c.rkey = binary.LittleEndian.Uint32(resp[8:])
	c.stride = int(binary.LittleEndian.Uint32(resp[12:]))
	if c.stride != herdStride(c.cfg.MaxMessage) {
		return fmt.Errorf("rpc: opening HERD requests: slot stride %d, want %d: %w", c.stride, herdStride(c.cfg.MaxMessage), verbs.ErrInvalidArg)
	}
	for i := range c.wordSGL {
		c.wordSGL[i] = verbs.SGE{Addr: c.mr.Addr() + uint64(c.wordBase+8*i), Length: 8, LKey: c.mr.LKey()}
	}
	c.herd = true
	return nil
}

func (c *Client) recvSGE(i int) verbs.SGE {
	size := c.cfg.MaxMessage
	return verbs.SGE{Addr: c.mr.Addr() + uint64(i*size), Length: uint32(size), LKey: c.mr.LKey()}
}

// Call calls method with req and copies the response payload into resp,
// returning its length (the response is cut to len(resp)). It returns a
// *RemoteError for a handler's error, ctx's error when ctx ends first
// (a late response is dropped), and ErrClosed after Close or a failed
// connection.
func (c *Client) Call(ctx context.Context, method uint16, req, resp []byte) (int, error) {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return 0, ErrClosed
	}
	if len(req)+Header > c.cfg.MaxMessage {
		return 0, fmt.Errorf("%w: a %d-byte request", ErrTooLarge, len(req))
	}
	var slot int
	select {
	case slot = <-c.free:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-c.done:
		return 0, c.closedErr()
	}
	n, size := c.cfg.Slots, c.cfg.MaxMessage
	c.mu.Lock()
	cl := &c.calls[slot]
	cl.gen++
	gen := cl.gen
	cl.resp, cl.n, cl.err = resp, 0, nil
	c.mu.Unlock()
	out := c.mr.Bytes()[(2*n+slot)*size : (2*n+slot+1)*size]
	putHeader(out, method, 0, uint32(slot)|gen<<16)
	copy(out[Header:], req)
	c.sgl[slot] = verbs.SGE{Addr: c.mr.Addr() + uint64((2*n+slot)*size), Length: uint32(Header + len(req)), LKey: c.mr.LKey()}
	signal := verbs.SendFlags(0)
	if c.sent.Add(1)%16 == 0 {
		signal = verbs.FlagSignaled // selective signaling
	}
	if c.herd && method != MethodHerdOpen {
		c.submitHerd(slot, Header+len(req), signal)
	} else {
		c.submit(verbs.SendWR{ID: c.tag.ID(uint64(slot)), Opcode: verbs.OpSend, Flags: signal, SGL: c.sgl[slot : slot+1]})
	}
	select {
	case <-cl.done:
		c.mu.Lock()
		got, err := cl.n, cl.err
		cl.resp = nil
		c.mu.Unlock()
		c.free <- slot
		return got, err
	case <-ctx.Done():
		// Abandon the slot's generation: a late response is dropped. The
		// slot is reused only once the request has been answered or the
		// connection is gone, so its buffer is not overwritten in flight.
		go func() {
			select {
			case <-cl.done:
			case <-c.done:
			}
			c.free <- slot
		}()
		c.mu.Lock()
		cl.gen++
		cl.resp = nil
		c.mu.Unlock()
		return 0, ctx.Err()
	case <-c.done:
		return 0, c.closedErr()
	}
}

// closedErr is a call's error once the poller has stopped: ErrClosed,
// with the connection's error when it failed rather than was closed.
func (c *Client) closedErr() error {
	if err := c.Err(); err != nil && !c.closed.Load() && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return ErrClosed
}

// submitHerd posts the request in slot's send buffer (length ln) as a
// WRITE into the server's slot followed by the WRITE of the slot's
// closing word.
func (c *Client) submitHerd(slot, ln int, signal verbs.SendFlags) {
	c.ctr[slot]++
	if c.ctr[slot] == 0 {
		c.ctr[slot] = 1 // 0 is the region's initial state
	}
	word := c.mr.Bytes()[c.wordBase+8*slot : c.wordBase+8*slot+8]
	binary.LittleEndian.PutUint64(word, uint64(c.ctr[slot])<<32|uint64(ln))
	dst := c.raddr + uint64(slot*c.stride)
	msg := verbs.SendWR{ID: c.tag.ID(uint64(slot)), Opcode: verbs.OpWrite, SGL: c.sgl[slot : slot+1], RemoteAddr: dst, RKey: c.rkey}
	end := verbs.SendWR{ID: msg.ID, Opcode: verbs.OpWrite, Flags: signal, SGL: c.wordSGL[slot : slot+1],
		RemoteAddr: dst + uint64(c.stride-8), RKey: c.rkey}
	if ln <= c.cfg.Inline {
		msg.Flags |= verbs.FlagInline
	}
	if c.cfg.Inline >= 8 {
		end.Flags |= verbs.FlagInline
	}
	c.submit(msg, end)
}

// post posts wrs, waiting out a full send queue: the requests already
// accepted stay posted, the rest go again once completions polled here
// (or by the poller) have freed room. It gives up when the connection
// fails.
func (c *Client) post(wrs []verbs.SendWR) error {
	return verbs.PostAll(c.qp, wrs, c.Progress, c.done)
}

// submit queues wr and, unless another caller is posting, posts
// everything queued as one list. A failed post fails the calls it carried.
func (c *Client) submit(wrs ...verbs.SendWR) { c.comb.Submit(wrs...) }

// failBatch fails the calls whose requests a failed post carried (the
// Combiner's Fail).
func (c *Client) failBatch(batch []verbs.SendWR, err error) {
	c.mu.Lock()
	for i := range batch {
		j := int(batch[i].ID & verbs.LowMask)
		if j >= len(c.calls) {
			continue // the liveness probe
		}
		cl := &c.calls[j]
		cl.err = err
		select {
		case cl.done <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
}

// poll receives completions and routes them: responses to their calls,
// foreign completions to their handlers.
func (c *Client) poll(ctx context.Context) {
	defer close(c.done)
	wc := make([]verbs.WC, 64)
	for {
		k, err := verbs.PollWait(ctx, c.cq, wc, c.cfg.Poll)
		if err == nil {
			_, err = c.router.Dispatch(wc[:k])
		}
		if err != nil {
			c.fail(err)
			return
		}
	}
}

// Progress polls the client's CQ once on the caller's goroutine and
// routes what it finds as the poller would, returning how many
// completions it handled. A caller waiting for its own completion can
// spin on it instead of waiting for the poller to wake it.
func (c *Client) Progress() int {
	var wc [16]verbs.WC
	k, err := c.cq.Poll(wc[:])
	if err != nil {
		c.fail(err)
		return 0
	}
	n, err := c.router.Dispatch(wc[:k])
	if err != nil {
		c.fail(err)
		return n - 1
	}
	return n
}

// Router is the router of the client's completions (ClientConfig.Router
// or the client's own): register on it to post requests of your own on
// the client's QP and have the client's poller deliver their
// completions.
func (c *Client) Router() *verbs.Router { return c.router }

// fail records the connection's first error and stops the poller.
func (c *Client) fail(err error) {
	c.errOnce.Do(func() { c.err = err })
	c.cancel()
}

// complete handles a completion of the client's own requests (its
// router handler); an error fails the connection.
func (c *Client) complete(w *verbs.WC) error {
	c.seen.Add(1)
	if w.Status != verbs.StatusSuccess {
		if w.ID&verbs.LowMask == probeID {
			return fmt.Errorf("rpc: client connection: the server's end is gone (liveness probe: %w)", w.Status.Err())
		}
		return fmt.Errorf("rpc: client connection: %v: %w", w.Opcode, w.Status.Err())
	}
	j := int(w.ID & verbs.LowMask)
	if w.ID&verbs.LowMask == probeID {
		c.probing.Store(false)
		return nil
	}
	if w.Opcode != verbs.WCRecv || j >= len(c.recvs) {
		return nil // a signaled request's completion: its slots are free
	}
	size := c.cfg.MaxMessage
	c.deliver(c.mr.Bytes()[j*size : j*size+int(w.ByteLen)])
	return c.qp.PostRecv(c.recvs[j : j+1])
}

// deliver matches a response to its call.
func (c *Client) deliver(msg []byte) {
	method, flags, id, ok := parseHeader(msg)
	if !ok {
		return
	}
	slot, gen := int(id&0xffff), id>>16
	if slot >= len(c.calls) {
		return
	}
	c.mu.Lock()
	cl := &c.calls[slot]
	if cl.gen&0xffff != gen {
		c.mu.Unlock()
		select { // an abandoned call's answer frees its slot
		case cl.done <- struct{}{}:
		default:
		}
		return
	}
	if flags&flagError != 0 {
		cl.err = &RemoteError{Method: method, Msg: string(msg[Header:])}
		if string(msg[Header:]) == ErrNoMethod.Error() {
			cl.err = fmt.Errorf("%w: %d", ErrNoMethod, method)
		}
	} else {
		cl.n = copy(cl.resp, msg[Header:])
	}
	c.mu.Unlock()
	select {
	case cl.done <- struct{}{}:
	default:
	}
}

// Done is closed once the client's poller has stopped: after Close or a
// failed connection (Err says why).
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the poller stopped: nil while it runs, context.Canceled
// after Close, the connection's error after a failure.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Close stops the client; calls in flight fail with ErrClosed.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	<-c.done
	<-c.watched // no probe is posted after Close
	c.router.Unregister(c.tag)
	c.life.Lock() // no call uses the buffers any more
	defer c.life.Unlock()
	return c.mr.Deregister()
}
