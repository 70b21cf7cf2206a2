package replica_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
)

// refused is a cm address nobody listens on.
func refused(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

// TestJoinWaitsForMajority: a replica that joins while none of the
// others answers is not a member — MethodInfo, MethodCreate, MethodRead
// and MethodReadTag fail with ErrRecovering, so clients leave it out —
// and keeps trying; closing it (SIGTERM does) stops the recovery at
// once.
func TestJoinWaitsForMajority(t *testing.T) {
	others := []string{refused(t), refused(t)}
	jc := &replica.JoinConfig{Replicas: []string{others[0], "self:1", others[1]}, Self: "self:1",
		Retry: time.Millisecond, MaxRetry: 5 * time.Millisecond, DialTimeout: 100 * time.Millisecond}
	srv, dial := start(t, replica.Config{MaxMemory: 64 << 20, Join: jc})
	c := dial()
	lay, err := replica.MarshalLayout(blockstore.Layout{BlockSize: 512, Blocks: 4, Replicas: jc.Replicas})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // several attempts
	for _, m := range []struct {
		method uint16
		req    []byte
	}{{replica.MethodInfo, nil}, {replica.MethodCreate, lay}, {replica.MethodRead, u64s(0)}, {replica.MethodReadTag, u64s(0)}} {
		if _, err := call(c, m.method, m.req); !errors.Is(err, replica.ErrRecovering) {
			t.Errorf("method %d while recovering: %v, want ErrRecovering", m.method, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("closing a replica whose recovery retries took more than 5 s")
	}
}

// TestJoinConfig: a join list that cannot be a volume's, or that lacks
// the replica itself, is refused when the replica starts.
func TestJoinConfig(t *testing.T) {
	for _, jc := range []replica.JoinConfig{
		{Replicas: []string{"a:1", "b:1", "c:1"}, Self: "d:1"},
		{Replicas: []string{"a:1", "a:1", "c:1"}, Self: "a:1"},
		{Replicas: []string{"a:1", "b:1"}, Self: "a:1"},
		{Replicas: []string{"a:1"}, Self: "a:1"},
	} {
		_, err := replica.Service(replica.Config{Join: &jc}, nil)(nil, nil)
		if !errors.Is(err, blockstore.ErrReplicas) {
			t.Errorf("join %v as %s: %v, want ErrReplicas", jc.Replicas, jc.Self, err)
		}
	}
}
