package bench

import (
	"context"
	"sync"
	"time"

	"github.com/pingcap/go-ycsb/pkg/ycsb"
	"github.com/rdmakit/rdmakit/kv/race"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/workload"
)

// KVDesigns are the store designs, in the order tables show them.
var KVDesigns = stores.Designs

type kvClient = stores.Client

// kvPoll is how the KV clients' pollers wait: parked on completion
// events, since several pollers share 2 cores.
var kvPoll = verbs.PollEvent

// kvLatencyPoll is how a lone latency-measuring client waits: it spins a
// while (2,000 polls, then 200 yields) before it parks, as a
// latency-sensitive application would.
var kvLatencyPoll = verbs.PollPolicy{Spin: 2000, Yield: 200, Park: true}

// KVNode is one store design's node on a device, with clients on
// another device: the in-process bed of the KV experiments and the demo.
type KVNode struct {
	Design       string
	node, client verbs.Device
	npd, cpd     verbs.PD
	server       stores.Server
	cache        *race.SlotCache
	rt           *smart.Runtime // Smart-HT's workers
	rtCQ         verbs.CQ       // the node's end of the workers' QPs
	ctx          context.Context
	cancel       context.CancelFunc
	serving      sync.WaitGroup
	clients      []kvClient
}

// NewKVNode starts a node of design, sized for records values of value
// bytes, on a new device opened at uri (and a
// client device at the same kind of uri: "tcp://127.0.0.1:0" or a loop
// fabric prefix "loop://NAME/").
func NewKVNode(design, uri string, records int64, value int) (*KVNode, error) {
	open := func(role string) (verbs.Device, verbs.PD, error) {
		u := uri
		if len(uri) > 7 && uri[:7] == "loop://" {
			u = uri + role
		}
		d, err := verbs.Open(u)
		if err != nil {
			return nil, nil, err
		}
		pd, err := d.AllocPD()
		if err != nil {
			d.Close()
			return nil, nil, err
		}
		return d, pd, nil
	}
	n := &KVNode{Design: design}
	var err error
	if n.node, n.npd, err = open("node"); err != nil {
		return nil, err
	}
	if n.client, n.cpd, err = open("client"); err != nil {
		n.node.Close()
		return nil, err
	}
	n.server, err = stores.NewServer(design, n.npd, records, value)
	if design == "smart-ht" {
		n.cache = race.NewSlotCache(0)
	}
	if err != nil {
		n.client.Close()
		n.node.Close()
		return nil, err
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if design == "smart-ht" {
		if err := n.startRuntime(); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// startRuntime starts Smart-HT's smart runtime on the client device: its
// workers' QPs connect to QPs of the node's device, which serves their
// one-sided requests with its NIC alone.
func (n *KVNode) startRuntime() error {
	cq, err := n.node.CreateCQ(1024)
	if err != nil {
		return err
	}
	n.rtCQ = cq
	connect := func(ctx context.Context, ccq verbs.CQ) (verbs.QP, error) {
		cqp, err := n.cpd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: ccq, RecvCQ: ccq, Cap: stores.QPCap})
		if err != nil {
			return nil, err
		}
		sqp, err := n.npd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: stores.QPCap})
		if err != nil {
			return nil, err
		}
		if err := verbs.ConnectRC(sqp, verbs.AccessAll, n.client.Address(), cqp.QPN()); err != nil {
			return nil, err
		}
		return cqp, stores.ConnectClient(cqp, n.node.Address(), sqp.QPN())
	}
	n.rt, err = stores.NewRuntime(n.ctx, n.client, n.cpd, connect, 0)
	return err
}

// Client connects a new client polling as kvPoll says.
func (n *KVNode) Client(ctx context.Context) (kvClient, error) { return n.ClientPolling(ctx, kvPoll) }

// ClientPolling connects a new client whose poller waits as poll says.
func (n *KVNode) ClientPolling(ctx context.Context, poll verbs.PollPolicy) (kvClient, error) {
	mk := func(d verbs.Device, pd verbs.PD) (verbs.QP, verbs.CQ, error) {
		cq, err := d.CreateCQ(4096)
		if err != nil {
			return nil, nil, err
		}
		qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq,
			Cap: stores.QPCap})
		return qp, cq, err
	}
	cqp, ccq, err := mk(n.client, n.cpd)
	if err != nil {
		return nil, err
	}
	sqp, scq, err := mk(n.node, n.npd)
	if err != nil {
		return nil, err
	}
	// The node's receives are posted before the client can send: its
	// first RPC never waits out RNR retries.
	if err := sqp.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}); err != nil {
		return nil, err
	}
	conn, err := n.server.Attach(sqp)
	if err != nil {
		return nil, err
	}
	if err := verbs.ConnectRC(sqp, verbs.AccessAll, n.client.Address(), cqp.QPN()); err != nil {
		conn.Close()
		return nil, err
	}
	if err := stores.ConnectClient(cqp, n.node.Address(), sqp.QPN()); err != nil {
		conn.Close()
		return nil, err
	}
	n.serving.Add(1)
	go func() {
		defer n.serving.Done()
		_ = conn.Serve(n.ctx, scq)
	}()
	c, err := stores.NewClient(ctx, n.Design, n.cpd, cqp, ccq, stores.ClientOptions{Poll: poll, Cache: n.cache, Runtime: n.rt, Slots: 64})
	if err != nil {
		return nil, err
	}
	n.clients = append(n.clients, c)
	return c, nil
}

// DBs returns k go-ycsb DBs on new clients, and the clients.
func (n *KVNode) DBs(ctx context.Context, k int) ([]ycsb.DB, []kvClient, error) {
	var dbs []ycsb.DB
	var cs []kvClient
	for i := 0; i < k; i++ {
		c, err := n.Client(ctx)
		if err != nil {
			return nil, nil, err
		}
		dbs = append(dbs, workload.DB{Store: c})
		cs = append(cs, c)
	}
	return dbs, cs, nil
}

// Trips sums the round trips of cs.
func trips(cs []kvClient) uint64 {
	var t uint64
	for _, c := range cs {
		t += c.RoundTrips()
	}
	return t
}

// CPU is the time the node's own threads spent on the store.
func (n *KVNode) CPU() time.Duration { return n.server.CPU() }

// Close stops the node and its clients.
func (n *KVNode) Close() {
	for _, c := range n.clients {
		c.Close()
	}
	if n.rt != nil {
		n.rt.Close()
	}
	n.cancel()
	n.serving.Wait()
	n.server.Close()
	n.client.Close()
	n.node.Close()
}
