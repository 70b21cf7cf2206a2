package main

import (
	"fmt"
	"os"
	"testing"
)

// TestPerfConnectShm serves a node over shared memory and measures it
// through the cm side channel with an shm client device.
func TestPerfConnectShm(t *testing.T) {
	node := fmt.Sprintf("shm://clinode-%d", os.Getpid())
	n := startNode(t, "--uri", node, "--echo", "--recv", "64")
	if n.info.Device != node {
		t.Fatalf("node serves %q, want %q", n.info.Device, node)
	}
	client := fmt.Sprintf("shm://cliclient-%d", os.Getpid())
	out, errs, code := execute(t, "perf", "--connect", n.info.CM, "--uri", client, "--op", "read,cas,send", "--test", "lat",
		"--iters", "200", "--size", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	mustContain(t, out, "RDMA_Read Latency Test", "Atomic CMP_AND_SWAP Latency Test", "Send Latency Test",
		" Transport      : shm", client+" -> "+node)
	for _, title := range []string{"RDMA_Read Latency Test", "Send Latency Test"} {
		if r := tableRows(out, title); r != 1 {
			t.Errorf("%s: %d rows, want 1:\n%s", title, r, out)
		}
	}
}
