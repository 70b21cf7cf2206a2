package remotedev

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/rdmakit/rdmakit/verbs"
)

// Client is the controlling end of a connection to a Serve-ing process.
// It is safe for concurrent use: calls from different goroutines proceed
// in parallel over the one connection.
type Client struct {
	conn *conn

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call
	err     error // why the connection is gone; nil while it works
	done    chan struct{}
	readers sync.WaitGroup
}

// call is one outstanding request.
type call struct {
	id   uint64
	resp response
	fds  []int
	err  error // transport failure
	done chan struct{}
}

// Dial connects to the server listening on the Unix domain socket at path.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("remotedev: dial %s: %w", path, err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("remotedev: dial %s: not a Unix domain socket", path)
	}
	return NewClient(uc), nil
}

// NewClient makes a client of an established control connection.
func NewClient(uc *net.UnixConn) *Client {
	c := &Client{conn: newConn(uc), pending: map[uint64]*call{}, done: make(chan struct{})}
	c.readers.Add(1)
	go c.readLoop()
	return c
}

// Close closes the connection: the server closes the devices it opened
// for this client; pending and later calls fail with an error wrapping
// verbs.ErrClosed. Memory regions stay mapped until they are deregistered
// or their device is closed.
func (c *Client) Close() error {
	c.conn.uc.Close()
	c.readers.Wait()
	return nil
}

// Done is closed when the connection is gone (closed, or the server died).
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection is gone, or nil while it works.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Client) readLoop() {
	defer c.readers.Done()
	for {
		var resp response
		if err := c.conn.read(&resp); err != nil {
			c.fail(err)
			return
		}
		var fds []int
		if resp.FDs > 0 {
			var err error
			if fds, err = c.conn.fr.take(resp.FDs); err != nil {
				c.fail(err)
				return
			}
		}
		c.mu.Lock()
		cl := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if cl == nil {
			closeFDs(fds)
			continue
		}
		cl.resp, cl.fds = resp, fds
		close(cl.done)
	}
}

// fail ends the connection: every pending call fails.
func (c *Client) fail(cause error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: remotedev: connection to the device server lost: %v", verbs.ErrClosed, cause)
		close(c.done)
	}
	for id, cl := range c.pending {
		cl.err = c.err
		close(cl.done)
		delete(c.pending, id)
	}
	c.mu.Unlock()
	c.conn.close()
}

// start sends req and returns the call to wait for.
func (c *Client) start(req *request) *call {
	cl := &call{done: make(chan struct{})}
	c.mu.Lock()
	if c.err != nil {
		cl.err = c.err
		c.mu.Unlock()
		close(cl.done)
		return cl
	}
	c.nextID++
	cl.id, req.ID = c.nextID, c.nextID
	c.pending[cl.id] = cl
	c.mu.Unlock()
	if err := c.conn.write(req, nil); err != nil {
		// Unblock the reader too; it fails every pending call.
		c.conn.uc.Close()
	}
	return cl
}

// send sends a request that gets no answer (opCancel).
func (c *Client) send(req request) {
	if err := c.conn.write(&req, nil); err != nil {
		c.conn.uc.Close()
	}
}

// result returns the answer of a finished call: the response (nil on a
// transport failure) and the call's error.
func (cl *call) result() (*response, error) {
	if cl.err != nil {
		return nil, cl.err
	}
	return &cl.resp, cl.resp.Err.decode()
}

// do runs one call and waits for its answer.
func (c *Client) do(req request) (*response, error) {
	cl := c.start(&req)
	<-cl.done
	resp, err := cl.result()
	if len(cl.fds) > 0 && (err != nil || req.Op != opPDAllocMR) {
		closeFDs(cl.fds)
		cl.fds = nil
	}
	return resp, err
}

// Open opens the device uri in the server process, e.g.
// "tcp://127.0.0.1:0?memfd=1", and returns a proxy of it. Its memory
// regions must be backed by memfds (AllocMR fails otherwise).
func (c *Client) Open(uri string) (verbs.Device, error) {
	resp, err := c.do(request{Op: opOpen, Str: uri})
	if err != nil {
		return nil, err
	}
	return &device{c: c, h: resp.Handle, addr: resp.Str, id: resp.ID32, attr: resp.Attr, mrs: map[*mr]struct{}{}}, nil
}

// IsProxy reports whether d is a device proxy made by a Client.
func IsProxy(d verbs.Device) bool {
	_, ok := d.(*device)
	return ok
}

// Crash crashes the server's device behind the proxy d with the function
// the server was given by WithCrash (e.g. tcp.Crash).
func Crash(d verbs.Device) error {
	p, ok := d.(*device)
	if !ok {
		return fmt.Errorf("%w: %T is not a remotedev proxy", verbs.ErrInvalidArg, d)
	}
	_, err := p.c.do(request{Op: opDevCrash, Target: p.h})
	return err
}
