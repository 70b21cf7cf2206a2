package objstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Client is a connection to a local store. Its methods are safe for
// concurrent use: requests are pipelined on one socket and one reader
// goroutine matches each reply to its caller by request ID.
type Client struct {
	conn      *net.UnixConn
	rw, ro    []byte // the arena, mapped read-write (Create) and read-only (Get)
	maxObject int64

	wmu sync.Mutex // serializes frame writes

	mu      sync.Mutex
	pending map[uint32]*call
	subs    map[uint32]*Subscription
	nextReq uint32
	err     error // why calls fail, once the reader stopped
	closing bool

	done      chan struct{} // closed when the reader stops
	closeOnce sync.Once
	closeErr  error
}

// reply is a reply frame handed from the reader to its caller.
type reply struct {
	typ byte
	b   []byte
}

// call is a request waiting for its reply.
type call struct {
	ch        chan reply // buffered: the reader never blocks on it
	typ       byte
	id        ID   // Create's
	ids       []ID // Get's
	abandoned bool // its caller gave up; the reader gives back what the reply gives
}

// Buffer is a sealed object as Get returns it: read-only views of its
// data and metadata in the store's shared memory (writing to them
// faults). It holds a reference to the object until Release; the views
// stay valid until the Client closes.
type Buffer struct {
	// ID names the object.
	ID ID
	// Data is the object's data; Metadata its metadata.
	Data, Metadata []byte
}

// Connect connects to the store listening on socket (a path or
// "@name"), receives its arena's file descriptor and maps the arena.
func Connect(ctx context.Context, socket string) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("objstore: connect to %s: %w", socket, err)
	}
	conn := nc.(*net.UnixConn)
	c, err := handshake(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("objstore: connect to %s: %w", socket, err)
	}
	go c.read()
	return c, nil
}

// handshake reads the store's hello and maps the arena it passes.
func handshake(ctx context.Context, conn *net.UnixConn) (*Client, error) {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(dl)
		defer conn.SetReadDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	const helloSize = headerSize + 4 + 8 + 8
	buf := make([]byte, helloSize)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("read hello: %w", err)
	}
	fd, err := rights(oob[:oobn])
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if n < helloSize {
		if _, err := io.ReadFull(conn, buf[n:]); err != nil {
			return nil, fmt.Errorf("read hello: %w", err)
		}
	}
	p := payload{b: buf[headerSize:]}
	version, size, maxObject := p.u32(), p.size(), p.size()
	if buf[0] != msgHello || version != protocolVersion || size <= 0 || p.end() != nil {
		return nil, fmt.Errorf("%w: bad hello (type %#x, version %d, arena %d)", ErrProtocol, buf[0], version, size)
	}
	rw, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the arena read-write: %w", err)
	}
	ro, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(rw)
		return nil, fmt.Errorf("map the arena read-only: %w", err)
	}
	return &Client{
		conn: conn, rw: rw, ro: ro, maxObject: maxObject,
		pending: map[uint32]*call{}, subs: map[uint32]*Subscription{},
		done: make(chan struct{}),
	}, nil
}

// rights returns the one file descriptor a control message carries.
func rights(oob []byte) (int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return -1, fmt.Errorf("%w: hello's control message: %v", ErrProtocol, err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, got...)
		}
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("%w: hello carried %d descriptors, want 1", ErrProtocol, len(fds))
	}
	return fds[0], nil
}

// read is the reader goroutine: it hands each reply to its caller and
// each notice to its subscription until the connection ends.
func (c *Client) read() {
	br := bufio.NewReaderSize(c.conn, 64<<10)
	var err error
	for {
		var h header
		var b []byte
		h, b, _, err = readFrame(br, nil, maxReplyFrame)
		if err != nil {
			break
		}
		switch h.typ {
		case msgNotify, msgLagged:
			c.deliver(h, b)
			continue
		}
		c.mu.Lock()
		cl := c.pending[h.reqID]
		delete(c.pending, h.reqID)
		c.mu.Unlock()
		switch {
		case cl == nil:
			// A reply to nothing: a store bug; nothing to give back.
		case cl.abandoned:
			c.orphan(cl, reply{typ: h.typ, b: b})
		default:
			cl.ch <- reply{typ: h.typ, b: b}
		}
	}
	c.mu.Lock()
	switch {
	case c.closing:
		c.err = ErrClosed
	case errors.Is(err, ErrProtocol):
		c.err = fmt.Errorf("%w: %w", ErrDisconnected, err)
	default:
		c.err = ErrDisconnected
	}
	subs := c.subs
	c.subs = map[uint32]*Subscription{}
	c.mu.Unlock()
	c.conn.Close() // after a malformed frame the socket is still open
	for _, s := range subs {
		s.end(c.err)
	}
	close(c.done)
}

// orphan gives back what the reply to an abandoned call (its caller's
// context ended) gave the client, so a cancelled Get leaves no reference
// and a cancelled Create no object behind. It runs on the reader
// goroutine, so the calls it makes run on their own.
func (c *Client) orphan(cl *call, rep reply) {
	p := payload{b: rep.b}
	if p.u8() != 0 {
		return
	}
	var give func(ctx context.Context, id ID) error
	var ids []ID
	switch cl.typ {
	case msgGet:
		give = c.Release
		n := p.count(getEntrySize, maxIDs)
		for i := range min(n, len(cl.ids)) {
			present := p.u8()
			p.u64()
			p.u64()
			p.u64()
			if present == 1 {
				ids = append(ids, cl.ids[i])
			}
		}
	case msgCreate:
		give = c.Abort
		ids = []ID{cl.id}
	}
	if len(ids) == 0 {
		return
	}
	go func() {
		for _, id := range ids {
			_ = give(context.Background(), id)
		}
	}()
}

// errNow is why calls fail now that the reader stopped.
func (c *Client) errNow() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return ErrDisconnected
}

// call sends r and waits for its reply. When ctx ends first, a
// cancellable request (a blocked Get, a Fetch) is cancelled at the store,
// and whatever the late reply gives is given back.
func (c *Client) call(ctx context.Context, r *request) ([]byte, error) {
	cl := &call{ch: make(chan reply, 1), typ: r.typ, id: r.id, ids: r.ids}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.nextReq++
	if c.nextReq == 0 {
		c.nextReq++
	}
	r.reqID = c.nextReq
	c.pending[r.reqID] = cl
	if r.register != nil {
		r.register(r.reqID)
	}
	c.mu.Unlock()
	if err := c.write(encodeRequest(nil, r)); err != nil {
		c.mu.Lock()
		delete(c.pending, r.reqID)
		c.mu.Unlock()
		return nil, err
	}
	var rep reply
	select {
	case rep = <-cl.ch:
	case <-c.done:
		select {
		case rep = <-cl.ch:
		default:
			return nil, c.errNow()
		}
	case <-ctx.Done():
		c.abandon(r, cl)
		return nil, ctx.Err()
	}
	if rep.typ != r.typ|replyBit {
		return nil, fmt.Errorf("%w: reply type %#x to request type %#x", ErrProtocol, rep.typ, r.typ)
	}
	p := payload{b: rep.b}
	if err := errorOf(p.u8()); err != nil || p.err != nil {
		return nil, errors.Join(err, p.err)
	}
	return p.b, nil
}

// abandon gives up on cl: a Get or Fetch is cancelled at the store; the
// reply, when it comes (or came), is given back by orphan.
func (c *Client) abandon(r *request, cl *call) {
	c.mu.Lock()
	_, waiting := c.pending[r.reqID]
	if waiting {
		cl.ids = slices.Clone(cl.ids) // the caller may reuse its slice
		cl.abandoned = true
	}
	c.mu.Unlock()
	if !waiting {
		// The reader took the reply already: it is in cl.ch or about to be
		// (unless the connection ended, which gives everything back).
		select {
		case rep := <-cl.ch:
			c.orphan(cl, rep)
		case <-c.done:
		}
		return
	}
	if r.typ == msgGet || r.typ == msgFetch || r.typ == msgSubscribe {
		_ = c.write(newFrame(nil, msgCancel, r.reqID).done())
	}
}

// write sends one frame.
func (c *Client) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.conn.Write(frame); err != nil {
		select {
		case <-c.done:
			return c.errNow()
		default:
		}
		return fmt.Errorf("%w: %v", ErrDisconnected, err)
	}
	return nil
}
