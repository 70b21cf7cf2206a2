package seq_test

import (
	"context"
	"testing"

	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/seq"
	"github.com/rdmakit/rdmakit/verbs"
)

// BenchmarkNext measures Next(1) of each design on loop, one caller at a
// time and several at once.
func BenchmarkNext(b *testing.B) {
	for _, design := range []string{"faa", "rpc", "header-only"} {
		b.Run(design, func(b *testing.B) {
			s := benchSequencer(b, design)
			b.Run("serial", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := s.Next(context.Background(), 1); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := s.Next(context.Background(), 1); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}

func benchSequencer(b *testing.B, design string) seq.Sequencer {
	c, s := connected(b)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	switch design {
	case "faa":
		f, err := seq.NewFAA(c.qp, c.cq, c.mr, s.mr.Addr(), s.mr.RKey(), 64, verbs.PollAdaptive)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		return f
	case "rpc":
		srv := rpc.NewServer(rpc.ServerConfig{})
		seq.NewRPCServer(srv, 0)
		go srv.Serve(ctx, s.pd, s.qp, s.cq)
		cl, err := rpc.NewClient(c.pd, c.qp, c.cq, rpc.ClientConfig{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cl.Close() })
		return seq.NewRPC(cl)
	}
	go seq.NewHeaderOnlyServer(0).Serve(ctx, s.qp, s.cq, 256, verbs.PollAdaptive)
	h, err := seq.NewHeaderOnly(c.qp, c.cq, 256, verbs.PollAdaptive)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h
}
