package smart_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// BenchmarkTaskRead measures an 8-byte READ run as a task's list on loop:
// one task (latency) and many tasks of two workers.
func BenchmarkTaskRead(b *testing.B) {
	fabric := fmt.Sprintf("smart-bench-%d", fabricSeq.Add(1))
	node := newMemoryNode(b, fabric, "node")
	dev, pd, buf := newClient(b, fabric)
	rt, err := smart.New(context.Background(), smart.Config{Device: dev, PD: pd, Nodes: []smart.ConnectFunc{node.connect(dev)},
		Workers: 2, Backoff: smart.BackoffConfig{Tasks: 64}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rt.Close)
	local := verbs.SGE{Addr: buf.Addr(), Length: 8, LKey: buf.LKey()}
	b.Run("serial", func(b *testing.B) {
		t, err := rt.Workers()[0].Enter(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		defer t.Leave()
		for i := 0; i < b.N; i++ {
			if err := t.Read(0, local, node.mr.Addr(), node.mr.RKey()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(4)
		var k atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			t, err := rt.Workers()[k.Add(1)%2].Enter(context.Background())
			if err != nil {
				b.Error(err)
				return
			}
			defer t.Leave()
			for pb.Next() {
				if err := t.Read(0, local, node.mr.Addr(), node.mr.RKey()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
