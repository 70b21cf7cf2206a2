package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/bench/peers"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/seq"
	"github.com/rdmakit/rdmakit/verbs"
)

func init() {
	Register(Experiment{
		Name: "sequencer",
		Description: "networked sequencers over tcp — one-sided FAA, RPC (one number, and 16 per call), header-only — " +
			"next to Redis INCR and memcached incr at equal concurrency and pipelining, numbers checked unique and gap-free",
		Run: runSequencer,
	})
}

var sequencerColumns = []Column{
	{Name: "system"}, {Name: "numbers_per_request"}, {Name: "rate", Unit: "M numbers/s"}, {Name: "requests", Unit: "Mops"},
	{Name: "checked"}, {Name: "vs_redis", Unit: "×"},
}

// Concurrency and pipelining of every system in the run.
const (
	seqConns    = 4
	seqPipeline = 16
)

// seqPoll is how every rdmakit poller of the experiment waits: parked on
// completion events. With a server and a client poller per connection on
// 2 cores, spinning pollers take the CPU the soft NICs need (the adaptive
// policy measured about half the rate).
var seqPoll = verbs.PollEvent

func runSequencer(ctx context.Context, env *Env) (*Result, error) {
	point := env.PointDuration(time.Second, 100*time.Millisecond)
	r := &Result{Name: "sequencer", Title: "networked sequencers vs Redis INCR and memcached incr", Columns: sequencerColumns,
		Plots: []Plot{{Title: "sequence numbers per second", Y: "rate", Series: []string{"system", "numbers_per_request"}, Bars: true}}}
	bar := env.Progress(9, 9*point, "sequencer")
	defer bar.Finish()
	var redis float64
	if srv, err := peers.StartRedis(ctx); err != nil {
		if !errors.Is(err, peers.ErrNotInstalled) {
			return nil, err
		}
		r.Notes = append(r.Notes, "redis-server is not installed (scripts/install-peers.sh): no Redis row.")
	} else {
		res, err := peers.RedisIncr(ctx, srv.Addr, seqConns, seqPipeline, point)
		srv.Stop()
		if err != nil {
			return nil, fmt.Errorf("redis INCR: %w", err)
		}
		redis = res.Rate()
		r.AddRow("Redis INCR", 1, redis, redis, "answers are integers", 1.0)
	}
	bar.Add(1)
	if srv, err := peers.StartMemcached(ctx); err != nil {
		if !errors.Is(err, peers.ErrNotInstalled) {
			return nil, err
		}
		r.Notes = append(r.Notes, "memcached is not installed (scripts/install-peers.sh): no memcached row.")
	} else {
		res, err := peers.MemcachedIncr(ctx, srv.Addr, seqConns, seqPipeline, point)
		srv.Stop()
		if err != nil {
			return nil, fmt.Errorf("memcached incr: %w", err)
		}
		r.AddRow("memcached incr", 1, res.Rate(), res.Rate(), "answers are integers", ratioTo(res.Rate(), redis))
	}
	bar.Add(1)
	for _, d := range []struct {
		name string
		n    int
	}{{"rdmakit FAA (one-sided)", 1}, {"rdmakit FAA, pipelined", 1}, {"rdmakit RPC", 1}, {"rdmakit RPC, batched", 16},
		{"rdmakit HERD RPC", 1}, {"rdmakit HERD RPC, batched", 16}, {"rdmakit header-only", 1}} {
		rate, reqs, err := runSeqDesign(ctx, d.name, d.n, point)
		if err != nil {
			return nil, fmt.Errorf("sequencer %s: %w", d.name, err)
		}
		r.AddRow(d.name, d.n, rate, reqs, "unique and gap-free", ratioTo(rate, redis))
		bar.Add(1)
	}
	r.Meta.Transport = "tcp"
	r.Notes = append(r.Notes,
		fmt.Sprintf("Every system serves %d connections, each keeping %d requests in flight, over 127.0.0.1. Redis and memcached run in their own processes; the rdmakit servers run in this process on tcp devices (their soft NIC and, for RPC and header-only, a serving goroutine per connection).", seqConns, seqPipeline),
		"FAA: a FETCH_AND_ADD on a counter in the server's memory per request, no server CPU; the plain rows have 16 goroutines per connection each calling Next, pipelined has one caller per connection posting 16 FETCH_AND_ADDs as one list and waiting for all (the way the Redis and memcached clients here pipeline: 16 commands per write). RPC: a SEND/RECV call, the server takes the numbers with one atomic add per call; batched asks 16 numbers per call. HERD RPC: the same call with the request WRITten (inline) into a region the server polls, the answer a SEND. header-only: a SEND_WITH_IMM of 0 bytes with the guessed high bits, answered with the low 32 bits.",
		"rate is numbers handed out per second, requests requests per second; every number rdmakit handed out is checked unique and gap-free (seq.Check). vs_redis divides rate by Redis INCR's.",
		fmt.Sprintf("Each point ran %v. rdmakit's pollers wait with the %v policy; the HERD server polls its request regions, spinning briefly, then yielding, then sleeping up to 200 µs.", point, seqPoll),
	)
	return r, nil
}

func ratioTo(v, base float64) any {
	if base <= 0 {
		return nil
	}
	return v / base
}

// seqSide is one end of a sequencer connection.
type seqSide struct {
	dev verbs.Device
	pd  verbs.PD
	cq  verbs.CQ
	qp  verbs.QP
	mr  verbs.MR
}

func openSeqSide(dev verbs.Device, pd verbs.PD) (*seqSide, error) {
	cq, err := dev.CreateCQ(4096)
	if err != nil {
		return nil, err
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1024, MaxRecvWR: 1024}})
	if err != nil {
		return nil, err
	}
	mr, err := pd.AllocMR(1<<16, verbs.AccessAll)
	if err != nil {
		return nil, err
	}
	return &seqSide{dev: dev, pd: pd, cq: cq, qp: qp, mr: mr}, nil
}

// runSeqDesign measures one rdmakit design: seqConns connections, each
// with seqPipeline goroutines taking n numbers per request.
func runSeqDesign(ctx context.Context, design string, n int, d time.Duration) (rate, reqs float64, err error) {
	server, err := verbs.Open("tcp://127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer server.Close()
	client, err := verbs.Open("tcp://127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer client.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var counter *seqSide         // FAA: the counter lives on the first server side
	spd, err := server.AllocPD() // one PD, so every connection reaches the counter
	if err != nil {
		return 0, 0, err
	}
	cpd, err := client.AllocPD()
	if err != nil {
		return 0, 0, err
	}
	rpcSrv := rpc.NewServer(rpc.ServerConfig{Recvs: 2 * seqPipeline, Poll: seqPoll})
	seq.NewRPCServer(rpcSrv, 0)
	hoSrv := seq.NewHeaderOnlyServer(0)
	var seqs []seq.Sequencer
	var serving sync.WaitGroup
	defer serving.Wait()
	defer cancel()
	for i := 0; i < seqConns; i++ {
		c, err := openSeqSide(client, cpd)
		if err != nil {
			return 0, 0, err
		}
		s, err := openSeqSide(server, spd)
		if err != nil {
			return 0, 0, err
		}
		if err := verbs.ConnectRC(c.qp, verbs.AccessAll, server.Address(), s.qp.QPN()); err != nil {
			return 0, 0, err
		}
		if err := verbs.ConnectRC(s.qp, verbs.AccessAll, client.Address(), c.qp.QPN()); err != nil {
			return 0, 0, err
		}
		if counter == nil {
			counter = s
		}
		switch design {
		case "rdmakit FAA (one-sided)", "rdmakit FAA, pipelined":
			f, err := seq.NewFAA(c.qp, c.cq, c.mr, counter.mr.Addr(), counter.mr.RKey(), seqPipeline, seqPoll)
			if err != nil {
				return 0, 0, err
			}
			defer f.Close()
			seqs = append(seqs, f)
		case "rdmakit header-only":
			serving.Add(1)
			go func() {
				defer serving.Done()
				_ = hoSrv.Serve(sctx, s.qp, s.cq, 2*seqPipeline, seqPoll)
			}()
			h, err := seq.NewHeaderOnly(c.qp, c.cq, 2*seqPipeline, seqPoll)
			if err != nil {
				return 0, 0, err
			}
			defer h.Close()
			seqs = append(seqs, h)
		default: // RPC
			conn, err := rpcSrv.Attach(s.pd, s.qp) // receives posted before the first call
			if err != nil {
				return 0, 0, err
			}
			serving.Add(1)
			go func() {
				defer serving.Done()
				_ = conn.Serve(sctx, s.cq)
			}()
			cfg := rpc.ClientConfig{Slots: seqPipeline, MaxMessage: rpc.MinMessage, Poll: seqPoll}
			if strings.HasPrefix(design, "rdmakit HERD") {
				cfg.Herd, cfg.Inline = true, verbs.DefaultMaxInlineData
			}
			cl, err := rpc.NewClient(c.pd, c.qp, c.cq, cfg)
			if err != nil {
				return 0, 0, err
			}
			defer cl.Close()
			seqs = append(seqs, seq.NewRPC(cl))
		}
	}
	var mu sync.Mutex
	var firsts []uint64
	var lens []int
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	deadline := time.Now().Add(d)
	start := time.Now()
	record := func(fs []uint64) {
		mu.Lock()
		firsts = append(firsts, fs...)
		for range fs {
			lens = append(lens, n)
		}
		mu.Unlock()
	}
	for _, s := range seqs {
		if f, ok := s.(*seq.FAA); ok && design == "rdmakit FAA, pipelined" {
			// One caller per connection, seqPipeline requests per post
			// list, in lockstep: the Redis client's pipelining.
			wg.Add(1)
			go func() {
				defer wg.Done()
				var fs []uint64
				out := make([]uint64, seqPipeline)
				for time.Now().Before(deadline) {
					if err := f.NextPipelined(ctx, n, out); err != nil {
						once.Do(func() { firstErr = err })
						return
					}
					fs = append(fs, out...)
				}
				record(fs)
			}()
			continue
		}
		for k := 0; k < seqPipeline; k++ {
			wg.Add(1)
			go func(s seq.Sequencer) {
				defer wg.Done()
				var fs []uint64
				for time.Now().Before(deadline) {
					v, err := s.Next(ctx, n)
					if err != nil {
						once.Do(func() { firstErr = err })
						return
					}
					fs = append(fs, v)
				}
				record(fs)
			}(s)
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, 0, firstErr
	}
	if _, err := seq.Check(firsts, lens); err != nil {
		return 0, 0, err
	}
	reqs = float64(len(firsts)) / elapsed.Seconds() / 1e6
	return reqs * float64(n), reqs, nil
}
