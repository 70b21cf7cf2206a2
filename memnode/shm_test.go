package memnode_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"

	_ "github.com/rdmakit/rdmakit/transport/shm"
)

// TestShm serves the regions over shared memory: the client's READ and
// WRITE run on the node's mapped memory.
func TestShm(t *testing.T) {
	node := fmt.Sprintf("shm://memnode-node-%d", os.Getpid())
	s := start(t, memnode.Config{Device: node, Memory: 64 << 10, Echo: true, Recv: 8})
	if s.Info().Device != node {
		t.Fatalf("device %q, want %q", s.Info().Device, node)
	}
	c, err := dial(t, fmt.Sprintf("shm://memnode-client-%d", os.Getpid()), s.Info().CM, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	copy(c.mr.Bytes(), "shm node")
	if st := c.do(t, verbs.OpWrite, 8); st != verbs.StatusSuccess {
		t.Fatalf("WRITE: %v", st)
	}
	clear(c.mr.Bytes())
	if st := c.do(t, verbs.OpRead, 8); st != verbs.StatusSuccess || string(c.mr.Bytes()[:8]) != "shm node" {
		t.Fatalf("READ: %v %q", st, c.mr.Bytes()[:8])
	}
	// One-sided work needs nothing of the node: the client can be done
	// before the node has finished its side of the exchange.
	waitFor(t, "the client to be tracked", func() bool { st := s.Stats(); return st.Clients == 1 && st.Accepted == 1 })
}
