// Package stores names rdmakit's key-value store designs and builds their
// node and client sides by name, for the CLI, the experiments and the
// demo.
package stores

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/kv/pilaf"
	"github.com/rdmakit/rdmakit/kv/prismkv"
	"github.com/rdmakit/rdmakit/kv/race"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// Designs are the store designs, in the order tables show them.
var Designs = []string{"pilaf", "prism-kv", "race", "smart-ht"}

// Server is a design's node side.
type Server interface {
	// Serve serves one client connection until ctx ends: Attach, then
	// the connection's Serve.
	Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ) error
	// Attach posts a client connection's receives on its QP (in INIT or
	// later) before the client can send: the client's first RPC then
	// never meets a receiver-not-ready. Serve the connection once it is
	// connected, or Close it.
	Attach(qp verbs.QP) (*rpc.ServerConn, error)
	// CPU is the time the node's own threads spent on the store.
	CPU() time.Duration
	// NodeStats are the node's counters (its /metrics).
	NodeStats() kv.NodeStats
	// Close releases the node's memory; stop serving first.
	Close() error
}

// Client is a design's client: a kv.Store that counts its round trips.
type Client interface {
	kv.Store
	// RoundTrips counts request lists and RPCs so far.
	RoundTrips() uint64
}

// NewServer lays out a node of design in pd sized for about keys keys of
// about value bytes each (0: 64): the item memory holds every key twice
// over in its power-of-two size class, room for out-of-place updates
// whose old items are not returned yet.
func NewServer(design string, pd verbs.PD, keys int64, value int) (Server, error) {
	slots := int(max(2*keys, 1<<14))
	if value <= 0 {
		value = 64
	}
	memory := func(floor int64) int {
		per := int64(64)
		for per < int64(value)+96 { // a key of a few dozen bytes plus headers
			per <<= 1
		}
		return int(max(keys*per*2, floor))
	}
	switch design {
	case "pilaf":
		return pilaf.NewServer(pd, pilaf.Config{Buckets: slots, Memory: memory(16 << 20)})
	case "prism-kv":
		// Four slots per key (16 B each): linear probing at a load of a
		// quarter finds a key in its home slot ~88% of the time, so a GET
		// with a cold slot cache still takes ~1.2 round trips (a half-full
		// table: ~1.5).
		return prismkv.NewServer(pd, prismkv.Config{Slots: int(max(4*keys, 1<<14)), Memory: memory(64 << 20)})
	case "race", "smart-ht":
		return race.NewServer(pd, race.Config{Depth: 4, Memory: memory(64 << 20)})
	}
	return nil, fmt.Errorf("%w: no store design %q (want one of %v)", verbs.ErrInvalidArg, design, Designs)
}

// ClientOptions tune a client.
type ClientOptions struct {
	// Poll is how the client's poller waits (default adaptive).
	Poll verbs.PollPolicy
	// Slots is how many operations the client runs at once (default
	// 16): the tasks sharing the client beyond that wait.
	Slots int
	// Cache is Smart-HT's slot cache, shared by the clients of a process
	// (nil: each Smart-HT client makes its own).
	Cache *race.SlotCache
	// Runtime runs Smart-HT's one-sided lists as tasks of its workers
	// (NewRuntime; shared by the clients of a process). Nil: they go on
	// the client's own connection.
	Runtime *smart.Runtime
	// SlotConnect, for PRISM-KV and, without a Runtime, Smart-HT, gives
	// each of the client's slots a connection of its own to the node
	// (prismkv and race ClientConfig.SlotConns): over shm a GET then
	// completes on its caller's goroutine. Nil: the slots share the
	// client's connection (or Smart-HT's runtime).
	SlotConnect func(ctx context.Context) (prismkv.SlotConn, error)
}

// NewRuntime starts the smart runtime that the Smart-HT clients of a
// process share: workers (one per core when workers is 0), each with its
// own QP to the node, made by connect on dev and pd — the clients'
// device and PD — and Smart's adaptive work-request throttling. Every
// client slot holds a task of a worker for the client's life, hence the
// large task limit. Its
// tuner's candidate limits suit a soft NIC, whose round trips are tens of
// microseconds: 64 or 128 requests in flight per worker, or unlimited.
func NewRuntime(ctx context.Context, dev verbs.Device, pd verbs.PD, connect smart.ConnectFunc, workers int) (*smart.Runtime, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	return smart.New(ctx, smart.Config{Device: dev, PD: pd, Nodes: []smart.ConnectFunc{connect}, Workers: workers,
		Throttle: true, Tuner: smart.TunerConfig{Candidates: []int{64, 128}},
		Backoff: smart.BackoffConfig{Tasks: 4096}, Poll: verbs.PollEvent, Gather: true})
}

// NewClient starts a client of design on qp (connected to the node's
// Serve, completions on cq).
func NewClient(ctx context.Context, design string, pd verbs.PD, qp verbs.QP, cq verbs.CQ, o ClientOptions) (Client, error) {
	switch design {
	case "pilaf":
		return pilaf.NewClient(ctx, pd, qp, cq, pilaf.ClientConfig{Poll: o.Poll, Slots: o.Slots})
	case "prism-kv":
		cfg := prismkv.ClientConfig{Poll: o.Poll, Slots: o.Slots}
		var err error
		if cfg.SlotConns, err = slotConns(ctx, o, cmp.Or(o.Slots, 16)); err != nil {
			return nil, err
		}
		return prismkv.NewClient(ctx, pd, qp, cq, cfg)
	case "race":
		return race.NewClient(ctx, pd, qp, cq, race.ClientConfig{Poll: o.Poll, Slots: o.Slots})
	case "smart-ht":
		cache := o.Cache
		if cache == nil {
			cache = race.NewSlotCache(0)
		}
		cfg := race.ClientConfig{Poll: o.Poll, Slots: o.Slots, Cache: cache, Backoff: &smart.BackoffConfig{Dynamic: true}, Runtime: o.Runtime}
		if o.Runtime == nil {
			var err error
			if cfg.SlotConns, err = slotConns(ctx, o, cmp.Or(o.Slots, 16)+1); err != nil { // one for the client itself
				return nil, err
			}
		}
		return race.NewClient(ctx, pd, qp, cq, cfg)
	}
	return nil, fmt.Errorf("%w: no store design %q (want one of %v)", verbs.ErrInvalidArg, design, Designs)
}

// slotConns makes n slot connections with o.SlotConnect (none without
// it), closing those made when one fails.
func slotConns(ctx context.Context, o ClientOptions, n int) ([]remote.SlotConn, error) {
	if o.SlotConnect == nil {
		return nil, nil
	}
	var scs []remote.SlotConn
	for range n {
		sc, err := o.SlotConnect(ctx)
		if err != nil {
			remote.CloseSlotConns(scs)
			return nil, err
		}
		scs = append(scs, sc)
	}
	return scs, nil
}

// QPCap is the queue sizes a client's connection needs (both ends).
var QPCap = verbs.QPCap{MaxSendWR: 1024, MaxRecvWR: 256, MaxInlineData: verbs.DefaultMaxInlineData}

// ConnectClient moves a client's RC QP from RESET to RTS, connected to
// the node's QP destQPN at dest, the way the stores want it: full access,
// and RNR retried RNRRetry times ClientMinRNR apart (about 30 ms), so that
// a PRISM-KV ALLOCATE that finds its free list empty waits for the node's
// next restock. Not forever: the buffers the client is returning travel
// on the same QP, behind the waiting ALLOCATE, so an exhausted node that
// only those returns could refill would never recover; the connection
// fails instead (kv.ErrUnreachable).
func ConnectClient(qp verbs.QP, dest string, destQPN uint32) error {
	if qp.State() == verbs.StateReset {
		if err := qp.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}); err != nil {
			return err
		}
	}
	if err := qp.Modify(verbs.QPAttr{State: verbs.StateRTR, Dest: dest, DestQPN: destQPN, MinRNRTimer: ClientMinRNR}); err != nil {
		return err
	}
	return qp.Modify(verbs.QPAttr{State: verbs.StateRTS, RNRRetry: ClientRNRRetry, Timeout: ClientTimeout})
}

// The RNR pacing of store clients (ConnectClient, and the kv CLI's dials).
const (
	ClientMinRNR   = 5 * time.Millisecond
	ClientRNRRetry = 6
)

// ClientTimeout is a store client's retry timeout (ConnectClient, Dial and the
// kv CLI's dials): a node that does not answer for 8 of them (2 s) fails
// the connection. The verbs default (64 ms, half a second in all) is an
// RDMA NIC's; a soft NIC on a loaded machine can be descheduled longer
// than that, and a client's connection then failed with RETRY_EXC_ERR
// although the node was alive (churn tests under load, with the race
// detector).
const ClientTimeout = 250 * time.Millisecond
