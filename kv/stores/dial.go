package stores

import (
	"context"
	"fmt"
	"net/url"
	"sync"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/kv"
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
}

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
	dial := func(ctx context.Context, cq verbs.CQ) (*cm.Conn, error) {
		conn, err := cm.Dial(ctx, dev, c.Node, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: QPCap, Access: verbs.AccessAll,
			MinRNRTimer: ClientMinRNR, RNRRetry: ClientRNRRetry, PrivateData: hello})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
		}
		r.mu.Lock()
		r.conns = append(r.conns, conn)
		r.mu.Unlock()
		return conn, nil
	}
	o := c.Options
	if c.Design == "smart-ht" {
		if o.Cache == nil {
			o.Cache = race.NewSlotCache(0)
		}
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
