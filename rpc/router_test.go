package rpc_test

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// routed starts a served client whose completions go through router and
// returns it with a region of the server's that its QP may access.
func routed(t *testing.T, router *verbs.Router) (*rpc.Client, *conn, verbs.MR) {
	t.Helper()
	cl, sv := pair(t, "loop")
	mr, err := sv.pd.AllocMR(4096, verbs.AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- newServer().Serve(ctx, sv.pd, sv.qp, sv.cq) }()
	t.Cleanup(func() { cancel(); <-served })
	c, err := rpc.NewClient(cl.pd, cl.qp, cl.cq, rpc.ClientConfig{Router: router})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if c.Router() != router {
		t.Fatalf("Router() = %p, want the configured %p", c.Router(), router)
	}
	return c, cl, mr
}

func add(t *testing.T, c *rpc.Client, a, b uint64) {
	t.Helper()
	req, resp := make([]byte, 16), make([]byte, 8)
	binary.LittleEndian.PutUint64(req, a)
	binary.LittleEndian.PutUint64(req[8:], b)
	if n, err := c.Call(context.Background(), methodAdd, req, resp); err != nil || n != 8 || binary.LittleEndian.Uint64(resp) != a+b {
		t.Fatalf("add(%d, %d) = %d bytes %d, %v", a, b, n, binary.LittleEndian.Uint64(resp), err)
	}
}

// TestForeignRequests posts one-sided requests of another user on the
// client's QP with a tag of its own while calls run: the client's poller
// routes their completions — successes and the StatusSkipped of a
// CONDITIONAL request that did not run — to that user's handler with its
// low bits intact, and the connection stays up.
func TestForeignRequests(t *testing.T) {
	router := new(verbs.Router)
	c, cl, mr := routed(t, router)
	var mu sync.Mutex
	var got []verbs.WC
	tag, err := router.Register(func(wc *verbs.WC) error {
		mu.Lock()
		got = append(got, *wc)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	local, err := cl.pd.AllocMR(64, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(mr.Bytes(), 7)
	sg := func(off int) []verbs.SGE {
		return []verbs.SGE{{Addr: local.Addr() + uint64(off), Length: 8, LKey: local.LKey()}}
	}
	cas := verbs.SendWR{ID: tag.ID(1), Opcode: verbs.OpAtomicCmpAndSwp, Flags: verbs.FlagSignaled, SGL: sg(0),
		RemoteAddr: mr.Addr(), RKey: mr.RKey()}
	cas.Atomic.Compare[0], cas.Atomic.Swap[0] = 99, 1 // fails: not an error
	wrs := []verbs.SendWR{cas,
		{ID: tag.ID(2), Opcode: verbs.OpWrite, Flags: verbs.FlagSignaled | verbs.FlagConditional, SGL: sg(8),
			RemoteAddr: mr.Addr() + 8, RKey: mr.RKey()},
		{ID: tag.ID(3), Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: sg(16), RemoteAddr: mr.Addr(), RKey: mr.RKey()},
	}
	for round := 0; round < 20; round++ {
		if err := cl.qp.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		add(t, c, uint64(round), 1)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 3*20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3*20 {
		t.Fatalf("%d foreign completions routed, want %d", len(got), 3*20)
	}
	want := []verbs.Status{verbs.StatusSuccess, verbs.StatusSkipped, verbs.StatusSuccess}
	for i, wc := range got {
		if wc.ID != tag.ID(uint64(i%3+1)) || wc.Status != want[i%3] {
			t.Errorf("completion %d: wr_id %#x %v, want %#x %v", i, wc.ID, wc.Status, tag.ID(uint64(i%3+1)), want[i%3])
		}
	}
	if got := binary.LittleEndian.Uint64(local.Bytes()[16:]); got != 7 {
		t.Errorf("READ returned %d, want 7", got)
	}
	if err := c.Err(); err != nil {
		t.Errorf("connection failed: %v", err)
	}
}

// TestForeignErrorFailsConnection: an error completion of another user's
// request fails the connection when its handler says so, and also when
// nobody handles it (the QP is in ERROR: the client's receives flush) —
// as the old Foreign hook did; the unrouted one is counted as dropped.
func TestForeignErrorFailsConnection(t *testing.T) {
	for _, registered := range []bool{true, false} {
		name := map[bool]string{true: "handled", false: "unrouted"}[registered]
		t.Run(name, func(t *testing.T) {
			router := new(verbs.Router)
			c, cl, mr := routed(t, router)
			add(t, c, 1, 2)
			id := uint64(5) // tag 0: nobody's
			if registered {
				tag, err := router.Register(func(wc *verbs.WC) error { return wc.Err() })
				if err != nil {
					t.Fatal(err)
				}
				id = tag.ID(5)
			}
			local, _ := cl.pd.AllocMR(64, verbs.AccessLocalWrite)
			bad := verbs.SendWR{ID: id, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
				SGL: []verbs.SGE{{Addr: local.Addr(), Length: 8, LKey: local.LKey()}}, RemoteAddr: mr.Addr(), RKey: mr.RKey() + 1}
			if err := cl.qp.PostSend([]verbs.SendWR{bad}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-c.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the connection survived a failed foreign request")
			}
			if err := c.Err(); err == nil || (registered && !errors.Is(err, verbs.StatusRemAccessErr.Err())) {
				t.Errorf("Err = %v", err)
			}
			if !registered && router.Dropped() == 0 {
				t.Errorf("the unrouted completion was not counted")
			}
			if _, err := c.Call(context.Background(), methodAdd, make([]byte, 16), make([]byte, 8)); !errors.Is(err, rpc.ErrClosed) {
				t.Errorf("call after the failure: %v", err)
			}
		})
	}
}

// TestSharedRouter: two clients on one router each get their own tag and
// their own responses.
func TestSharedRouter(t *testing.T) {
	router := new(verbs.Router)
	a, _, _ := routed(t, router)
	b, _, _ := routed(t, router)
	for i := 0; i < 50; i++ {
		add(t, a, uint64(i), 1)
		add(t, b, uint64(i), 2)
	}
	if router.Dropped() != 0 {
		t.Errorf("%d completions dropped", router.Dropped())
	}
}
