package farm_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/txn/farm"
)

// listeners returns n loopback listeners and their addresses.
func listeners(t *testing.T, n int) ([]net.Listener, []string) {
	t.Helper()
	var addrs []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return lns, addrs
}

// startMembers starts a member per node of a 3-node layout, with
// tokens[i] as member i's token.
func startMembers(t *testing.T, f int, tokens ...string) ([]*farm.Membership, farm.Layout) {
	t.Helper()
	lns, addrs := listeners(t, len(tokens))
	l := farm.Layout{Nodes: []string{"n0", "n1", "n2", "n3"}[:len(tokens)], F: f}
	ms := make([]*farm.Membership, len(tokens))
	for i := range ms {
		m, err := farm.StartMembership(farm.MembershipConfig{Self: i, Addrs: addrs, Listener: lns[i], Layout: l, Token: tokens[i],
			Silence: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		ms[i] = m
	}
	return ms, l
}

func TestInitialConfiguration(t *testing.T) {
	c := farm.InitialConfiguration(farm.Layout{Nodes: []string{"a", "b", "c", "d"}, F: 2})
	if c.Epoch != 1 || !slices.Equal(c.Primaries, []int{0, 1, 2, 3}) || !slices.Equal(c.Backups[3], []int{0, 1}) {
		t.Fatalf("%+v", c)
	}
}

// TestMembershipPromotes kills the member of a primary: the others take
// it out, promote its shard's first backup, and agree on the epoch.
func TestMembershipPromotes(t *testing.T) {
	ms, _ := startMembers(t, 2, "tok", "tok", "tok", "tok")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !slices.ContainsFunc(ms, (*farm.Membership).Leader) {
		if ctx.Err() != nil {
			t.Fatal("no leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Stay at epoch 1 while everyone answers.
	time.Sleep(400 * time.Millisecond)
	if e := ms[1].Configuration().Epoch; e != 1 {
		t.Fatalf("epoch %d with every member alive", e)
	}
	ms[0].Close()
	var got []farm.Configuration
	for _, m := range ms[1:] {
		c, err := m.Wait(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	c := got[0]
	want := fmt.Sprint(farm.Configuration{Epoch: 2, Primaries: []int{1, 1, 2, 3},
		Backups: [][]int{{2}, {2, 3}, {3}, {1}}, Out: []bool{true, false, false, false}})
	for i, g := range got {
		if fmt.Sprint(g) != want {
			t.Fatalf("member %d: %+v, want %s", i+1, g, want)
		}
	}
	// Nothing more changes: the others are alive.
	time.Sleep(400 * time.Millisecond)
	if e := ms[2].Configuration().Epoch; e != c.Epoch {
		t.Fatalf("epoch %d after the promotion settled at %d", e, c.Epoch)
	}
}

// TestMembershipToken: a member whose token is wrong is never heard,
// and the others take it out.
func TestMembershipToken(t *testing.T) {
	ms, _ := startMembers(t, 1, "tok", "tok", "bad")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ms[0].Wait(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Out[2] || c.Out[0] || c.Out[1] || c.Primaries[2] != 0 {
		t.Fatalf("%+v", c)
	}
	if e := ms[2].Configuration().Epoch; e != 1 {
		t.Fatalf("the unheard member applied epoch %d", e)
	}
}
