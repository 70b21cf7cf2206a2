package rpctree

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// DialConfig says where the tree is served, for Dial.
type DialConfig struct {
	// Device is the client's device URI (verbs.Open).
	Device string
	// Node is the server's cm address (memnode.Info.CM).
	Node string
	// Token is the server's token.
	Token string
	// Slots is the calls in flight at once (default 32, at most Recvs).
	Slots int
	// Poll is how the client waits for answers (default adaptive).
	Poll verbs.PollPolicy
}

// Client is a client of an RPC tree. It implements btree.Tree; its
// methods are safe for concurrent use.
type Client struct {
	dev    verbs.Device
	conn   *cm.Conn
	cq     verbs.CQ
	rpc    *rpc.Client
	bufs   sync.Pool
	trips  atomic.Uint64
	bytes  atomic.Uint64
	closed atomic.Bool
	once   sync.Once
	cerr   error
}

var _ btree.Tree = (*Client)(nil)

// Dial opens a device, connects to the server and returns a client;
// Close releases all of it.
func Dial(ctx context.Context, dc DialConfig) (_ *Client, err error) {
	slots := dc.Slots
	if slots <= 0 {
		slots = 32
	}
	if slots > Recvs {
		return nil, fmt.Errorf("%w: rpctree: %d slots (at most %d)", verbs.ErrInvalidArg, slots, Recvs)
	}
	dev, err := verbs.Open(dc.Device)
	if err != nil {
		return nil, fmt.Errorf("rpctree: %w", err)
	}
	c := &Client{dev: dev}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, fmt.Errorf("rpctree: %w", err)
	}
	if c.cq, err = dev.CreateCQ(2 * (QPCap.MaxSendWR + QPCap.MaxRecvWR)); err != nil {
		return nil, fmt.Errorf("rpctree: %w", err)
	}
	c.conn, err = cm.Dial(ctx, dev, dc.Node, cm.Options{PD: pd, SendCQ: c.cq, RecvCQ: c.cq, Cap: QPCap,
		Access: verbs.AccessAll, PrivateData: memnode.Hello{Service: Name, Token: dc.Token}.Marshal()})
	if err != nil {
		return nil, fmt.Errorf("%w: rpctree: %s: %w", btree.ErrUnreachable, dc.Node, err)
	}
	if got := c.conn.PeerPrivateData(); string(got) != Name {
		return nil, fmt.Errorf("%w: rpctree: %s does not serve an RPC B-tree (it answered %d bytes of %q)", btree.ErrLayout, dc.Node, len(got), Name)
	}
	c.rpc, err = rpc.NewClient(pd, c.conn.QP(), c.cq, rpc.ClientConfig{MaxMessage: MaxMessage, Slots: slots, Poll: dc.Poll})
	if err != nil {
		return nil, fmt.Errorf("rpctree: %w", err)
	}
	c.bufs.New = func() any { b := make([]byte, MaxMessage); return &b }
	return c, nil
}

// Stats counts a client's calls.
type Stats struct {
	RoundTrips uint64 // calls made (one round trip each)
	BytesRead  uint64 // response payload bytes received
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats { return Stats{RoundTrips: c.trips.Load(), BytesRead: c.bytes.Load()} }

// call makes one call, its answer in resp.
func (c *Client) call(ctx context.Context, method uint16, req, resp []byte) (int, error) {
	if c.closed.Load() {
		return 0, btree.ErrClosed
	}
	c.trips.Add(1)
	n, err := c.rpc.Call(ctx, method, req, resp)
	if err != nil {
		var re *rpc.RemoteError
		switch {
		case errors.As(err, &re) && strings.Contains(re.Msg, btree.ErrTooLarge.Error()):
			return 0, fmt.Errorf("%w: %s", btree.ErrTooLarge, re.Msg)
		case ctx.Err() != nil:
			return 0, err
		case errors.Is(err, rpc.ErrClosed) && c.closed.Load():
			return 0, fmt.Errorf("%w: %w", btree.ErrClosed, err)
		}
		return 0, fmt.Errorf("%w: rpctree: %w", btree.ErrUnreachable, err)
	}
	c.bytes.Add(uint64(n))
	return n, nil
}

func (c *Client) buf() *[]byte  { return c.bufs.Get().(*[]byte) }
func (c *Client) put(b *[]byte) { c.bufs.Put(b) }

// Get implements btree.Tree.
func (c *Client) Get(ctx context.Context, key, dst []byte) ([]byte, error) {
	if err := btree.Check(key, nil, MaxKey, MaxValue); err != nil {
		return dst, err
	}
	b := c.buf()
	defer c.put(b)
	n, err := c.call(ctx, MethodGet, key, *b)
	if err != nil {
		return dst, err
	}
	if n < 1 {
		return dst, errProtocol
	}
	if (*b)[0] == 0 {
		return dst, btree.ErrNotFound
	}
	return append(dst, (*b)[1:n]...), nil
}

// Put implements btree.Tree.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	if err := btree.Check(key, value, MaxKey, MaxValue); err != nil {
		return err
	}
	b := c.buf()
	defer c.put(b)
	req := append(append(append((*b)[:0], byte(len(key))), key...), value...)
	resp := make([]byte, 0, 1)
	_, err := c.call(ctx, MethodPut, req, resp[:1])
	return err
}

// Delete implements btree.Tree.
func (c *Client) Delete(ctx context.Context, key []byte) error {
	if err := btree.Check(key, nil, MaxKey, MaxValue); err != nil {
		return err
	}
	var resp [1]byte
	_, err := c.call(ctx, MethodDelete, key, resp[:])
	return err
}

// Close implements btree.Tree: calls in flight fail.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		var errs []error
		if c.rpc != nil {
			errs = append(errs, c.rpc.Close())
		}
		if c.conn != nil {
			errs = append(errs, c.conn.Close())
		}
		if c.cq != nil {
			errs = append(errs, c.cq.Destroy())
		}
		errs = append(errs, c.dev.Close())
		c.cerr = errors.Join(errs...)
	})
	return c.cerr
}
