package rpc_test

import (
	"context"
	"testing"

	"github.com/rdmakit/rdmakit/rpc"
)

// BenchmarkCall measures a call's round trip on loop: one caller at a
// time (latency) and many callers pipelining on the connection.
func BenchmarkCall(b *testing.B) {
	for _, mode := range []struct {
		name string
		cfg  rpc.ClientConfig
	}{{"send", rpc.ClientConfig{}}, {"herd", rpc.ClientConfig{Herd: true, Inline: 64}}} {
		b.Run(mode.name, func(b *testing.B) {
			c := benchClient(b, mode.cfg)
			b.Run("serial", func(b *testing.B) {
				req, resp := make([]byte, 16), make([]byte, 8)
				for i := 0; i < b.N; i++ {
					if _, err := c.Call(context.Background(), methodAdd, req, resp); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					req, resp := make([]byte, 16), make([]byte, 8)
					for pb.Next() {
						if _, err := c.Call(context.Background(), methodAdd, req, resp); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}

// benchClient connects a client to a served newServer on loop.
func benchClient(b *testing.B, cfg rpc.ClientConfig) *rpc.Client {
	cl, sv := pair(b, "loop")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- newServer().Serve(ctx, sv.pd, sv.qp, sv.cq) }()
	b.Cleanup(func() { cancel(); <-served })
	c, err := rpc.NewClient(cl.pd, cl.qp, cl.cq, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
