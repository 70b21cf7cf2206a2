package farm_test

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/txn/farm"
)

// TestMembershipHostilePeers: connections to a member's membership
// address that send garbage, a wrong hello, a frame past the size bound
// or a frame that is not a raft message are closed by the member, one
// that never sends its hello is closed at the hello deadline, and the
// membership goes on meanwhile: it still takes a stopped member out.
func TestMembershipHostilePeers(t *testing.T) {
	const token = "tok"
	lns, addrs := listeners(t, 3)
	l := farm.Layout{Nodes: []string{"n0", "n1", "n2"}, F: 1}
	ms := make([]*farm.Membership, 3)
	for i := range ms {
		m, err := farm.StartMembership(farm.MembershipConfig{Self: i, Addrs: addrs, Listener: lns[i], Layout: l, Token: token,
			Silence: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		ms[i] = m
	}
	hello := func(from uint32) []byte {
		return binary.LittleEndian.AppendUint32(append([]byte{byte(len(token))}, token...), from)
	}
	frame := func(size uint32, body []byte) []byte {
		return append(binary.LittleEndian.AppendUint32(nil, size), body...)
	}
	hostile := map[string][]byte{
		"garbage":           []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"wrong token":       binary.LittleEndian.AppendUint32([]byte{3, 'b', 'a', 'd'}, 1),
		"itself":            hello(0),
		"no such member":    hello(7),
		"oversized frame":   append(hello(1), frame(1<<31, nil)...),
		"not a raft frame":  append(hello(1), frame(8, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})...),
		"no hello (silent)": nil,
	}
	for name, b := range hostile {
		c, err := net.Dial("tcp", addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("%s: the member did not close the connection: %v", name, err)
		}
	}
	// Still a membership: a stopped member is taken out.
	ms[2].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ms[0].Wait(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Out[2] || c.Out[0] || c.Out[1] {
		t.Fatalf("%+v", c)
	}
}
