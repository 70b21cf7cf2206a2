package sherman_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/btree/sherman"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"

	_ "github.com/rdmakit/rdmakit/transport/loop"
)

var fabrics atomic.Int64

// bed is memory nodes on a loop fabric of the test's own and a client
// device on it.
type bed struct {
	fabric string
	nodes  []memnode.Info
	dev    verbs.Device
	pd     verbs.PD
}

// newBed starts n memory nodes of memory bytes each (one region).
func newBed(t testing.TB, n int, memory int64) *bed {
	t.Helper()
	b := &bed{fabric: fmt.Sprintf("sherman-%d", fabrics.Add(1))}
	for i := range n {
		srv, err := memnode.Start(context.Background(), memnode.Config{
			Device: fmt.Sprintf("loop://%s/mem%d", b.fabric, i), CM: "127.0.0.1:0",
			Memory: memory, Regions: 1, Token: "t", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		b.nodes = append(b.nodes, srv.Info())
	}
	dev, err := verbs.Open(fmt.Sprintf("loop://%s/client", b.fabric))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	b.dev = dev
	if b.pd, err = dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	return b
}

// dial connects to every memory node of infos from dev.
func dial(t testing.TB, dev verbs.Device, pd verbs.PD, infos []memnode.Info, slots int) []sherman.Conn {
	t.Helper()
	conns, closeAll, err := dialConns(dev, pd, infos, slots)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAll)
	return conns
}

// dialConns connects to every memory node of infos from dev; closeAll
// closes the connections.
func dialConns(dev verbs.Device, pd verbs.PD, infos []memnode.Info, slots int) (conns []sherman.Conn, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for _, f := range closers {
			f()
		}
	}
	for _, info := range infos {
		cq, err := dev.CreateCQ(8*slots + 64)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		conn, err := cm.Dial(context.Background(), dev, info.CM, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq,
			Cap:         verbs.QPCap{MaxSendWR: sherman.QPDepth(slots), MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
			PrivateData: memnode.Hello{Token: "t"}.Marshal()})
		if err != nil {
			cq.Destroy()
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, func() { conn.Close(); cq.Destroy() })
		regs, err := cm.DecodeDescs(conn.PeerPrivateData())
		if err != nil || len(regs) == 0 {
			closeAll()
			return nil, nil, fmt.Errorf("regions: %v %w", regs, err)
		}
		conns = append(conns, sherman.Conn{QP: conn.QP(), CQ: cq, Region: sherman.Region{Addr: regs[0].Addr, Len: regs[0].Len, RKey: regs[0].RKey}})
	}
	return conns, closeAll, nil
}

// client opens a client of the bed's tree.
func (b *bed) client(t testing.TB, cfg sherman.Config) *sherman.Client {
	t.Helper()
	if cfg.Slots == 0 {
		cfg.Slots = 8
	}
	if cfg.Smart != nil {
		cfg.Smart = b.smart(t, *cfg.Smart)
	}
	c, err := sherman.Open(context.Background(), b.pd, dial(t, b.dev, b.pd, b.nodes, cfg.Slots), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// small is a layout that splits often.
var small = sherman.Layout{KeySize: 16, ValueSize: 16, LeafSlots: 4, InnerSlots: 4}

// smart returns sc with the bed's device and a Connect per memory node
// (the connections close at the test's end).
func (b *bed) smart(t testing.TB, sc sherman.SmartConfig) *sherman.SmartConfig {
	tasks := sc.Tasks
	if tasks <= 0 {
		tasks = 8
	}
	sc.Device, sc.Connect = b.dev, nil
	var mu sync.Mutex
	for _, info := range b.nodes {
		sc.Connect = append(sc.Connect, func(ctx context.Context, cq verbs.CQ) (verbs.QP, error) {
			conn, err := cm.Dial(ctx, b.dev, info.CM, cm.Options{PD: b.pd, SendCQ: cq, RecvCQ: cq, Cap: sherman.SmartQPCap(tasks),
				PrivateData: memnode.Hello{Token: "t"}.Marshal()})
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			t.Cleanup(func() { conn.Close() })
			return conn.QP(), nil
		})
	}
	return &sc
}
