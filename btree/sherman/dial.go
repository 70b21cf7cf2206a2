package sherman

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

// DialConfig says where a tree lives, for Dial.
type DialConfig struct {
	Config
	// Device is the client's device URI (verbs.Open), e.g.
	// "tcp://127.0.0.1:0?token=SECRET" for memory nodes served with
	// Token SECRET over tcp (memnode gives its device the token).
	Device string
	// Nodes are the memory nodes' cm addresses (memnode.Info.CM); the
	// first holds the root word. Every client must list them in the
	// same order.
	Nodes []string
	// Token is the memory nodes' token (memnode.Config.Token).
	Token string
	// Region is the region of each memory node the tree lives in
	// (default 0).
	Region int
}

// Dial opens a device, connects to the memory nodes and opens a client
// of the tree there; Close releases all of it.
func Dial(ctx context.Context, dc DialConfig) (_ *Client, err error) {
	if len(dc.Nodes) == 0 {
		return nil, fmt.Errorf("%w: sherman: no memory nodes", verbs.ErrInvalidArg)
	}
	slots := dc.Slots
	if slots <= 0 {
		slots = 16
	}
	dev, err := verbs.Open(dc.Device)
	if err != nil {
		return nil, fmt.Errorf("sherman: %w", err)
	}
	var closers []func() error
	closeAll := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	closers = append(closers, dev.Close)
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, fmt.Errorf("sherman: %w", err)
	}
	var conns []Conn
	for _, addr := range dc.Nodes {
		cq, err := dev.CreateCQ(8*slots + 64)
		if err != nil {
			return nil, fmt.Errorf("sherman: %w", err)
		}
		conn, err := cm.Dial(ctx, dev, addr, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq,
			Cap:         verbs.QPCap{MaxSendWR: QPDepth(slots), MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
			PrivateData: memnode.Hello{Token: dc.Token}.Marshal()})
		if err != nil {
			cq.Destroy()
			return nil, fmt.Errorf("sherman: memory node %s: %w", addr, err)
		}
		closers = append(closers, func() error { return errors.Join(conn.Close(), cq.Destroy()) })
		regs, err := cm.DecodeDescs(conn.PeerPrivateData())
		if err != nil {
			return nil, fmt.Errorf("sherman: memory node %s: %w", addr, err)
		}
		if dc.Region < 0 || dc.Region >= len(regs) {
			return nil, fmt.Errorf("%w: sherman: memory node %s has %d regions, not region %d", verbs.ErrInvalidArg, addr, len(regs), dc.Region)
		}
		r := regs[dc.Region]
		conns = append(conns, Conn{QP: conn.QP(), CQ: cq, Region: Region{Addr: r.Addr, Len: r.Len, RKey: r.RKey}})
	}
	cfg := dc.Config
	if cfg.Smart != nil {
		sc := cfg.Smart.withDefaults()
		sc.Device, sc.Connect = dev, nil
		var mu sync.Mutex
		for _, addr := range dc.Nodes {
			sc.Connect = append(sc.Connect, func(ctx context.Context, cq verbs.CQ) (verbs.QP, error) {
				conn, err := cm.Dial(ctx, dev, addr, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: SmartQPCap(sc.Tasks),
					PrivateData: memnode.Hello{Token: dc.Token}.Marshal()})
				if err != nil {
					return nil, fmt.Errorf("sherman: memory node %s: %w", addr, err)
				}
				mu.Lock()
				closers = append(closers, conn.Close)
				mu.Unlock()
				return conn.QP(), nil
			})
		}
		cfg.Smart = &sc
	}
	c, err := Open(ctx, pd, conns, cfg)
	if err != nil {
		return nil, err
	}
	c.owned = closeAll
	return c, nil
}
