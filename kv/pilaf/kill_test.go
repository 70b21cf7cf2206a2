package pilaf_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/pilaf"
	"github.com/rdmakit/rdmakit/verbs"
)

func init() {
	kvtest.WriterRole("pilaf-writer", func(ctx context.Context, addr string) (kv.Store, error) {
		return dialNode(ctx, addr)
	}, nil)
}

// dialNode connects a client, on its own tcp device, to the node at addr
// (kvtest.ServeNode's).
func dialNode(ctx context.Context, addr string) (*kvtest.Remote[*pilaf.Client], error) {
	return kvtest.DialNode(ctx, addr, "pilaf", func(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ) (*pilaf.Client, error) {
		return pilaf.NewClient(ctx, pd, qp, cq, pilaf.ClientConfig{})
	})
}

// Where the node holds a writer's RPC while the writer is killed.
const (
	heldPut    = "put-held"
	heldDelete = "delete-held"
)

// holder holds the node's first PUT or DELETE of a writer's key (the
// writers' keys start with "w"; the healthy clients' do not) once armed.
type holder struct {
	mu      sync.Mutex
	del     bool
	armed   bool
	held    chan struct{}
	release chan struct{}
}

func (h *holder) arm(point string) (<-chan struct{}, func(), bool) {
	if point != heldPut && point != heldDelete {
		return nil, nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.del, h.armed = point == heldDelete, true
	h.held, h.release = make(chan struct{}), make(chan struct{})
	release := h.release
	return h.held, func() { close(release) }, true
}

func (h *holder) hold(del bool, key []byte) {
	h.mu.Lock()
	if !h.armed || del != h.del || !bytes.HasPrefix(key, []byte("w")) {
		h.mu.Unlock()
		return
	}
	h.armed = false
	held, release := h.held, h.release
	h.mu.Unlock()
	close(held)
	<-release // the writer is dead: run its RPC, answer nobody
}

// TestKilledWriters kills writer processes (SIGKILL) while the node runs
// their PUT or DELETE (the RPC in flight: the node answers a dead
// connection), and at random points of their writes. The healthy clients
// then insert 1000 keys, pass porcupine, and each Close returns within a
// second. Pilaf has no split: its index is a fixed array of buckets, and
// a writer holds nothing in the node (its writes are RPCs).
func TestKilledWriters(t *testing.T) {
	var h holder
	addr, _ := kvtest.ServeNode(t, "pilaf", func(pd verbs.PD) (*pilaf.Server, error) {
		s, err := pilaf.NewServer(pd, pilaf.Config{Buckets: 1 << 14, Memory: 16 << 20})
		if err == nil {
			pilaf.HoldWrites(s, h.hold)
		}
		return s, err
	})
	var cs []kv.Store
	for range 4 {
		c, err := dialNode(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	kvtest.KillWriters(t, cs, kvtest.KillConfig{
		Role: "pilaf-writer", Dial: addr,
		Points: []string{heldPut, heldDelete, kvtest.Random, kvtest.Random},
		Hold:   h.arm,
	})
	for _, c := range cs {
		kvtest.CloseWithin(t, c, time.Second)
	}
}
