package stores

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/prismkv"
	"github.com/rdmakit/rdmakit/kv/race"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// DialConfig says how to reach a store node served by memnode (`rdmakit
// kv serve`).
type DialConfig struct {
	// Design is the store design the clients speak.
	Design string
	// Device is the URI of the clients' own device, opened by Dial (the
	// node must reach it: tcp://… or, on the node's host, shm://…).
	Device string
	// Node is the node's connection manager address (host:port).
	Node string
	// Token is the node's auth token; empty when it has none. A tcp
	// device also presents it (token=).
	Token string
	// Clients is how many client connections to open (at least one).
	Clients int
	// Options are every client's options; Cache and Runtime are filled
	// in for Smart-HT.
	Options ClientOptions
	// SlotQPs gives each slot of a PRISM-KV or Smart-HT client a
	// connection of its own (Options.SlotConnect, dialed here): a
	// SingleThreaded QP and CQ that only the slot's caller uses (Smart-HT
	// then runs without the smart runtime: per-task QPs instead of
	// per-worker ones, and nothing to throttle). Meant for a shm device,
	// where a GET then completes on its caller's goroutine; every slot is
	// one more connection the node serves.
	SlotQPs bool
}

// slotCap is the queue sizes of a slot's own connection: its longest list
// (a batch of 64 returned buffers, then one WRITE each) and no RPCs.
var slotCap = verbs.QPCap{MaxSendWR: 160, MaxRecvWR: 1, MaxInlineData: verbs.DefaultMaxInlineData}

// Remote is a process's clients of a store node in another process: its
// device, the clients' connections and, for Smart-HT, the runtime whose
// workers have connections of their own.
type Remote struct {
	// Device is the clients' device.
	Device verbs.Device
	// Clients are the connections' stores.
	Clients []Client

	rt    *smart.Runtime
	mu    sync.Mutex // conns, also appended by the runtime's connects
	conns []*cm.Conn
	slots atomic.Int64 // slot connections dialed (SlotQPs), owned by the clients
}

// Dial opens a device and c.Clients client connections of c.Design to
// the node at c.Node. Close releases them all.
func Dial(ctx context.Context, c DialConfig) (*Remote, error) {
	if err := CheckDesign(c.Design); err != nil {
		return nil, err
	}
	if c.Clients < 1 {
		return nil, fmt.Errorf("%w: %d clients", verbs.ErrInvalidArg, c.Clients)
	}
	uri := c.Device
	if c.Token != "" {
		u, err := url.Parse(uri)
		if err != nil {
			return nil, fmt.Errorf("stores: device %q: %w", uri, err)
		}
		q := u.Query()
		q.Set("token", c.Token)
		u.RawQuery = q.Encode()
		uri = u.String()
	}
	dev, err := verbs.Open(uri)
	if err != nil {
		return nil, err
	}
	r := &Remote{Device: dev}
	pd, err := dev.AllocPD()
	if err != nil {
		dev.Close()
		return nil, err
	}
	hello := memnode.Hello{Service: c.Design, Token: c.Token}.Marshal()
	dialCap := func(ctx context.Context, cq verbs.CQ, qc verbs.QPCap, single bool) (*cm.Conn, error) {
		conn, err := cm.Dial(ctx, dev, c.Node, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: qc, Access: verbs.AccessAll,
			MinRNRTimer: ClientMinRNR, RNRRetry: ClientRNRRetry, Timeout: ClientTimeout, PrivateData: hello, SingleThreaded: single})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
		}
		return conn, nil
	}
	dial := func(ctx context.Context, cq verbs.CQ) (*cm.Conn, error) {
		conn, err := dialCap(ctx, cq, QPCap, false)
		if err == nil {
			r.mu.Lock()
			r.conns = append(r.conns, conn)
			r.mu.Unlock()
		}
		return conn, err
	}
	o := c.Options
	slotQPs := c.SlotQPs && (c.Design == "prism-kv" || c.Design == "smart-ht")
	if slotQPs {
		o.SlotConnect = func(ctx context.Context) (prismkv.SlotConn, error) {
			// The client closes it, before Close closes the device.
			cq, err := verbs.CreateCQEx(dev, verbs.CQInitAttr{Depth: 2 * slotCap.MaxSendWR, SingleThreaded: true})
			if err != nil {
				return prismkv.SlotConn{}, err
			}
			conn, err := dialCap(ctx, cq, slotCap, true)
			if err != nil {
				cq.Destroy()
				return prismkv.SlotConn{}, err
			}
			r.slots.Add(1)
			return prismkv.SlotConn{QP: conn.QP(), CQ: cq, Close: func() {
				conn.Close()
				cq.Destroy()
			}}, nil
		}
	}
	if c.Design == "smart-ht" && o.Cache == nil {
		o.Cache = race.NewSlotCache(0)
	}
	if c.Design == "smart-ht" && !slotQPs {
		// The workers' QPs: more connections to the node, carrying only
		// one-sided requests.
		connect := func(ctx context.Context, cq verbs.CQ) (verbs.QP, error) {
			conn, err := dial(ctx, cq)
			if err != nil {
				return nil, err
			}
			return conn.QP(), nil
		}
		if r.rt, err = NewRuntime(ctx, dev, pd, connect, 0); err != nil {
			r.Close()
			return nil, err
		}
		o.Runtime = r.rt
	}
	for range c.Clients {
		cq, err := dev.CreateCQ(4096)
		if err != nil {
			r.Close()
			return nil, err
		}
		conn, err := dial(ctx, cq)
		if err != nil {
			r.Close()
			return nil, err
		}
		s, err := NewClient(ctx, c.Design, pd, conn.QP(), cq, o)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.Clients = append(r.Clients, s)
	}
	return r, nil
}

// RoundTrips sums the clients' round trips.
func (r *Remote) RoundTrips() uint64 {
	var t uint64
	for _, c := range r.Clients {
		t += c.RoundTrips()
	}
	return t
}

// Connections is how many connections to the node Dial opened: the
// clients', the runtime's workers' and the slots' own.
func (r *Remote) Connections() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns) + int(r.slots.Load())
}

// Close closes the clients, the runtime, the connections and the device.
func (r *Remote) Close() {
	for _, s := range r.Clients {
		s.Close()
	}
	if r.rt != nil {
		r.rt.Close()
	}
	r.mu.Lock()
	conns := r.conns
	r.conns = nil
	r.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	r.Device.Close()
}
