package membership_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/txn/internal/membership"
)

// start starts n members with f backups per shard.
func start(t *testing.T, n, f int, keepLast bool) ([]*membership.Member, []string) {
	t.Helper()
	var lns []net.Listener
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	ms := make([]*membership.Member, n)
	for i := range ms {
		m, err := membership.Start(membership.Config{Self: i, Addrs: addrs, Listener: lns[i], F: f, Token: "tok",
			Silence: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), Params: []byte("p"), KeepLastCopy: keepLast})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		ms[i] = m
	}
	return ms, addrs
}

// TestQuery: a client's query answers the configuration with the
// members' params and its age; after a member is taken out, the new
// epoch, young; a query with the wrong token gets no answer.
func TestQuery(t *testing.T) {
	ms, addrs := start(t, 3, 1, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := membership.Query(ctx, addrs[1], "tok")
	if err != nil || a.Epoch != 1 || string(a.Params) != "p" {
		t.Fatalf("%+v, %v", a, err)
	}
	if _, err := membership.Query(ctx, addrs[1], "bad"); err == nil {
		t.Fatal("a query with the wrong token was answered")
	}
	ms[0].Close()
	if _, err := ms[1].Wait(ctx, 2); err != nil {
		t.Fatal(err)
	}
	a, err = membership.Query(ctx, addrs[2], "tok")
	if err != nil || a.Epoch != 2 || !a.Out[0] || a.Primaries[0] != 1 {
		t.Fatalf("%+v, %v", a, err)
	}
	if a.Age < 0 || a.Age > 5*time.Second {
		t.Fatalf("epoch 2's age %v", a.Age)
	}
}

// TestReadWithoutQuorum: a member cut from a majority answers no
// linearizable read.
func TestReadWithoutQuorum(t *testing.T) {
	ms, _ := start(t, 3, 1, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := ms[2].Read(ctx); err != nil {
		t.Fatal(err)
	}
	ms[0].Close()
	ms[1].Close()
	short, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if c, _, err := ms[2].Read(short); err == nil {
		t.Fatalf("a read without a quorum: %+v", c)
	}
}

// TestKeepLastCopy: with five nodes and one backup per shard, node 0
// goes out; node 1 then holds the last copy of shard 0 and stays in
// when it falls silent — and goes out without KeepLastCopy (the
// negative control).
func TestKeepLastCopy(t *testing.T) {
	for _, keep := range []bool{true, false} {
		ms, _ := start(t, 5, 1, keep)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		ms[0].Close()
		if _, err := ms[4].Wait(ctx, 2); err != nil {
			t.Fatal(err)
		}
		ms[1].Close()
		// Node 1 goes out within a few silences, if ever; a live member
		// slow under load may go out meanwhile, which says nothing here.
		until := time.Now().Add(2 * time.Second)
		for time.Now().Before(until) && !ms[4].Configuration().Out[1] {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		c := ms[4].Configuration()
		if keep && c.Out[1] {
			t.Fatalf("the last copy's node was taken out: %+v", c)
		}
		if !keep && !c.Out[1] {
			t.Fatalf("without KeepLastCopy, node 1 stayed in: %+v", c)
		}
	}
}
