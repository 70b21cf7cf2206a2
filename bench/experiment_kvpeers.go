package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pingcap/go-ycsb/pkg/ycsb"
	"github.com/rdmakit/rdmakit/bench/peers"
	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/workload"
)

func init() {
	Register(Experiment{
		Name: "kv-peers",
		Description: "the four key-value stores, each node its own `rdmakit kv serve` process, over tcp and over shm, next to memcached (-t 1, -t 2) and Redis, " +
			"unbatched and at rdmakit's batch (multi-get, MGET); YCSB-C, server CPU per operation",
		Run: runKVPeers,
	})
}

var peersColumns = []Column{
	{Name: "system"}, {Name: "transport"}, {Name: "tasks"}, {Name: "conns"}, {Name: "batch"},
	{Name: "rate", Unit: "Mops"}, {Name: "runs", Unit: "Mops"}, {Name: "spread", Unit: "%"},
	{Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"},
	{Name: "server_cpu", Unit: "µs/op"}, {Name: "client_cpu", Unit: "µs/op"},
	{Name: "vs_memcached", Unit: "×"}, {Name: "vs_redis", Unit: "×"},
}

// kvPeerTasks are the client concurrencies of kv-peers, the same for
// every system: requests in flight.
var kvPeerTasks = []int{8, 32}

// kvPeerRounds is how many times kv-peers runs every system, in turn:
// the medians of the rounds are reported (and every round), so that a
// noisy moment of the machine does not decide a ratio.
const kvPeerRounds = 3

// kvServeTCP is the device of the kv-peers nodes served over tcp: its
// soft NIC parks as soon as a connection has nothing to read (the rule
// docs/kv.md gives for a node whose cores are busy — here with the
// clients).
const kvServeTCP = "tcp://127.0.0.1:0?spin=0s"

// kvMemcachedThreads are the memcached worker thread counts kv-peers
// measures: one and one per core of this machine.
var kvMemcachedThreads = []int{1, 2}

// peerSys is one row source of kv-peers: a system, how its clients
// reach it, and its measurements.
type peerSys struct {
	name, transport string
	peer            string  // "memcached" or "Redis" for the peers' rows
	batched         bool    // a peer row at rdmakit's batch
	pid             int     // the server's process
	node            *Server // an rdmakit node's, nil for the peers
	addr            string  // a peer's address (its batching clients dial it)
	wl              ycsb.Workload
	dbs             map[int][]ycsb.DB // the clients of a run, by tasks
	// batch returns the round trips (writes, for rdmakit over tcp) and
	// the GETs (requests) they carried so far; nil: not counted (1 for
	// unbatched peers, none over shm, where GETs are loads).
	batch func() (trips, keys uint64)
	pts   map[int][]peerPoint // by tasks, one per round
	conns int                 // an rdmakit client's connections to its node (0: one per DB)
}

// peerPoint is one run of a system.
type peerPoint struct {
	res            workload.Result
	server, client float64 // CPU µs per operation; NaN: unknown
	batch          float64 // GETs per round trip; NaN: not counted
}

func (s *peerSys) median(t int, f func(peerPoint) float64) float64 {
	var v []float64
	for _, p := range s.pts[t] {
		if x := f(p); !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func rateOf(p peerPoint) float64 { return p.res.Rate() / 1e6 }

// kvPeersRun is the state of one kv-peers run.
type kvPeersRun struct {
	env     *Env
	r       *Result
	y       workload.YCSB
	tasks   []int
	records int64
	value   int
	sys     []*peerSys
	cleanup []func()
	skipped []string
	retried []string // loads that lost their connection and ran again
}

// kvLoadAttempts bounds the loads of an rdmakit node.
const kvLoadAttempts = 3

// kvPointGrace bounds how long a point may run past its duration.
const kvPointGrace = 30 * time.Second

func runKVPeers(ctx context.Context, env *Env) (res *Result, err error) {
	point := env.PointDuration(time.Second, 200*time.Millisecond)
	records, value := kvSizes(env)
	rounds, tasks, designs := kvPeerRounds, kvPeerTasks, KVDesigns
	if env.Quick { // the two stores the acceptance names, one round at 8 tasks
		rounds, tasks, designs = 1, tasks[:1], []string{"prism-kv", "smart-ht"}
	}
	k := &kvPeersRun{env: env, tasks: tasks, records: records, value: value,
		y: workload.YCSB{Workload: "c", Distribution: "uniform", Records: records, ValueSize: value, Duration: point},
		r: &Result{Name: "kv-peers", Title: "key-value stores vs memcached and Redis (YCSB-C, every server its own process)", Columns: peersColumns,
			Plots: []Plot{{Title: "YCSB-C throughput against client tasks", X: "tasks", Y: "rate", Series: []string{"system", "transport"}}}}}
	defer func() {
		for i := len(k.cleanup) - 1; i >= 0; i-- {
			k.cleanup[i]()
		}
	}()
	systems := 2*len(kvMemcachedThreads) + 2 + 2*len(designs)
	steps := systems + len(tasks) + rounds*len(tasks)*systems
	bar := env.Progress(steps, time.Duration(steps)*point, "kv-peers")
	defer bar.Finish()

	// Start and load every system, then find rdmakit's batch (PRISM-KV
	// over tcp), then give the peers' batching clients that batch.
	for _, th := range kvMemcachedThreads {
		if err := k.addPeer(ctx, "memcached", th); err != nil {
			return nil, err
		}
		bar.Add(2)
	}
	if err := k.addPeer(ctx, "Redis", 0); err != nil {
		return nil, err
	}
	bar.Add(2)
	for _, transport := range []string{"tcp", "shm"} {
		for _, d := range designs {
			if err := k.addStore(ctx, d, transport); err != nil {
				return nil, err
			}
			bar.Add(1)
		}
	}
	batch := map[int]int{}
	for _, t := range tasks {
		batch[t] = t // without rdmakit rows: every task's GET in one request
		if s := k.find("prism-kv", "tcp"); s != nil {
			p, err := k.measure(ctx, s, t)
			if err != nil {
				return nil, err
			}
			batch[t] = max(1, int(math.Round(p.batch)))
		}
		bar.Add(1)
	}
	if err := k.batchPeers(ctx, batch); err != nil {
		return nil, err
	}

	for range rounds {
		for _, t := range tasks {
			for _, s := range k.sys {
				p, err := k.measure(ctx, s, t)
				if err != nil {
					return nil, err
				}
				s.pts[t] = append(s.pts[t], p)
				bar.Add(1)
			}
		}
	}
	k.rows()
	k.notes(point, rounds, batch)
	k.r.Meta.Transport = "tcp, shm"
	return k.r, nil
}

func (k *kvPeersRun) find(name, transport string) *peerSys {
	for _, s := range k.sys {
		if s.name == name && s.transport == transport {
			return s
		}
	}
	return nil
}

// addPeer starts memcached (with threads worker threads) or Redis, loads
// it and adds its unbatched row: one connection per task.
func (k *kvPeersRun) addPeer(ctx context.Context, peer string, threads int) error {
	name := peer
	var srv *peers.Server
	var err error
	dial := func(ctx context.Context, a string) (kv.Store, error) { return peers.DialRedisKV(ctx, a) }
	if peer == "memcached" {
		name = fmt.Sprintf("memcached -t %d", threads)
		srv, err = peers.StartMemcachedThreads(ctx, threads)
		dial = func(ctx context.Context, a string) (kv.Store, error) { return peers.DialMemcachedKV(ctx, a) }
	} else {
		srv, err = peers.StartRedis(ctx)
	}
	if errors.Is(err, peers.ErrNotInstalled) {
		k.skipped = append(k.skipped, fmt.Sprintf("%s: no rows (%v).", name, err))
		return nil
	}
	if err != nil {
		return err
	}
	k.cleanup = append(k.cleanup, srv.Stop)
	s := &peerSys{name: name, transport: "tcp", peer: peer, pid: srv.Pid(), dbs: map[int][]ycsb.DB{}, pts: map[int][]peerPoint{}}
	var dbs []ycsb.DB
	for range slices.Max(k.tasks) {
		c, err := dial(ctx, srv.Addr)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		k.cleanup = append(k.cleanup, func() { c.Close() })
		dbs = append(dbs, workload.DB{Store: c})
	}
	for _, t := range k.tasks {
		s.dbs[t] = dbs[:t]
	}
	y := k.y
	if s.wl, err = y.Load(ctx, dbs[:min(8, len(dbs))]); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	k.sys = append(k.sys, s)
	// Its batched row, clients made once rdmakit's batch is known.
	b := &peerSys{name: name + map[string]string{"memcached": " multi-get", "Redis": " MGET"}[peer], transport: "tcp", peer: peer, batched: true,
		pid: srv.Pid(), dbs: map[int][]ycsb.DB{}, pts: map[int][]peerPoint{}, batch: func() (uint64, uint64) { return 0, 0 }}
	b.addr = srv.Addr
	if b.wl, err = y.Load(ctx, nil); err != nil {
		return err
	}
	k.sys = append(k.sys, b)
	return nil
}

// batchPeers connects the peers' batching clients: at t tasks, ⌊t/B⌋
// connections (B = batch[t]), the tasks spread evenly over them, each
// sending the GETs of its waiting tasks as one request: as many GETs in
// flight as with the unbatched clients, and each request carries at
// least B when they all wait (never fewer keys than rdmakit's frames).
func (k *kvPeersRun) batchPeers(ctx context.Context, batch map[int]int) error {
	for _, s := range k.sys {
		if !s.batched {
			continue
		}
		var all []*peers.BatchKV
		for _, t := range k.tasks {
			conns := max(1, t/batch[t])
			b := (t + conns - 1) / conns // every waiting task of a connection fits
			for range conns {
				dial := peers.DialMemcachedBatch
				if s.peer == "Redis" {
					dial = peers.DialRedisBatch
				}
				c, err := dial(ctx, s.addr, b)
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				k.cleanup = append(k.cleanup, func() { c.Close() })
				all = append(all, c)
				s.dbs[t] = append(s.dbs[t], workload.DB{Store: c})
			}
		}
		s.batch = func() (trips, keys uint64) {
			for _, c := range all {
				trips += c.RoundTrips()
				keys += c.Keys()
			}
			return trips, keys
		}
	}
	return nil
}

// kvServeSeq numbers the shm devices of kv-peers' nodes and clients.
var kvServeSeq atomic.Int64

// addStore starts a `kv serve` node of design on transport (tcp or shm),
// connects a client to it (all tasks share it, as coroutines share a QP)
// and loads it.
func (k *kvPeersRun) addStore(ctx context.Context, design, transport string) error {
	nodeDev, clientDev, loadDev := kvServeTCP, kvNodeURI, kvNodeURI
	if transport == "shm" {
		base := fmt.Sprintf("shm://rdmakit-kvp-%d-%d", os.Getpid(), kvServeSeq.Add(1))
		nodeDev, clientDev, loadDev = base+"-node", base+"-client", base+"-loader"
	}
	n, err := startKVServe(ctx, k.env, design, nodeDev, k.records, k.value)
	if errors.Is(err, ErrNoCommand) {
		if len(k.skipped) == 0 || !strings.Contains(k.skipped[len(k.skipped)-1], "rdmakit stores") {
			k.skipped = append(k.skipped, "rdmakit stores: no rows (the experiment runs `rdmakit kv serve`: run it through the rdmakit command).")
		}
		return nil
	}
	if err != nil {
		return err
	}
	k.cleanup = append(k.cleanup, n.Stop)
	s := &peerSys{name: design, transport: transport, pid: n.Pid(), node: n, dbs: map[int][]ycsb.DB{}, pts: map[int][]peerPoint{}}
	// Loading can fail on a loaded machine: a PRISM-KV client that PUTs
	// faster than the node's process gets the CPU to restock its free
	// lists loses its connection after ~30 ms of refused ALLOCATEs
	// (kv/prismkv's doc, Failures). The PUTs are idempotent: load again
	// on a new connection, and say so in the notes.
	// The loading client shares one connection among its tasks.
	dial := func(dev string, slotQPs bool) (*stores.Remote, error) {
		// Bounded: a node that never answers a client's first RPC fails
		// the run instead of holding it (seen once in CI, Smart-HT over shm).
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, err := stores.Dial(dctx, stores.DialConfig{Design: design, Device: dev, Node: n.Addr, Token: n.Token, Clients: 1, SlotQPs: slotQPs,
			Options: stores.ClientOptions{Poll: kvPoll, Slots: 64}})
		if err != nil {
			return nil, fmt.Errorf("%s over %s: %w", design, transport, err)
		}
		return c, nil
	}
	for attempt := 1; ; attempt++ {
		lc, err := dial(loadDev, false)
		if err != nil {
			return err
		}
		db := workload.DB{Store: lc.Clients[0]}
		y := k.y
		s.wl, err = y.Load(ctx, []ycsb.DB{db, db, db, db, db, db, db, db})
		if err == nil {
			// Kept until the end: closing it before the measured client
			// dialed left that client's first RPC unanswered once over
			// shm (Smart-HT, CI: an open defect of the node).
			k.cleanup = append(k.cleanup, lc.Close)
			break
		}
		lc.Close()
		if attempt == kvLoadAttempts || !errors.Is(err, kv.ErrUnreachable) {
			return fmt.Errorf("%s over %s: %w", design, transport, err)
		}
		k.retried = append(k.retried, fmt.Sprintf("%s over %s (%v)", design, transport, err))
	}
	// The measured client: over tcp the tasks share its connection (its
	// frames batch their requests); over shm every slot has its own
	// (stores.DialConfig.SlotQPs): a GET is then posted and its
	// completion taken on its task's goroutine, with no hand-off. (Its
	// PUTs, 64 slots at once, outran the node's restocking of PRISM-KV's
	// free lists while loading: ALLOCATEs refused for 30 ms cost the
	// client every slot's connection, three loads in a row in one run.)
	c, err := dial(clientDev, transport == "shm")
	if err != nil {
		return err
	}
	k.cleanup = append(k.cleanup, c.Close)
	s.conns = c.Connections()
	db := workload.DB{Store: c.Clients[0]}
	for _, t := range k.tasks {
		s.dbs[t] = []ycsb.DB{db}
	}
	if transport == "tcp" {
		s.batch = func() (uint64, uint64) {
			w, r, _ := tcp.Batching(c.Device)
			return w, r
		}
	}
	k.sys = append(k.sys, s)
	return nil
}

// measure runs s at t tasks for a point, with the server's and this
// process's CPU time and the batch over the run.
func (k *kvPeersRun) measure(ctx context.Context, s *peerSys, t int) (peerPoint, error) {
	cpu := func(pid int) time.Duration {
		d, err := ProcCPU(pid)
		if err != nil {
			return -1
		}
		return d
	}
	var t0, g0 uint64
	if s.batch != nil {
		t0, g0 = s.batch()
	}
	s0, c0 := cpu(s.pid), cpu(os.Getpid())
	y := k.y
	y.Threads = t
	// A point that outlives its duration by kvPointGrace has operations
	// stuck: the run fails, saying so, instead of waiting for good.
	rctx, cancel := context.WithTimeout(ctx, y.Duration+kvPointGrace)
	stuck := time.AfterFunc(y.Duration+kvPointGrace-time.Second, func() {
		// Where the operations wait, for the defect report, before the
		// context ends them.
		fmt.Fprintf(os.Stderr, "kv-peers: %s over %s, %d tasks: operations still waiting; every goroutine:\n", s.name, s.transport, t)
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		fmt.Fprintf(os.Stderr, "kv-peers: this process's QPs that wait:\n")
		nic.DumpQPs(os.Stderr)
		if s.node != nil {
			fmt.Fprintf(os.Stderr, "kv-peers: the node's goroutines (SIGQUIT):\n%s\n", s.node.Dump())
		}
	})
	res, err := y.Run(rctx, s.wl, s.dbs[t])
	stuck.Stop()
	cancel()
	s1, c1 := cpu(s.pid), cpu(os.Getpid())
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		err = fmt.Errorf("operations still waiting %v past the point's %v: %w", kvPointGrace, y.Duration, err)
	}
	if err != nil {
		return peerPoint{}, fmt.Errorf("%s over %s, %d tasks: %w", s.name, s.transport, t, err)
	}
	p := peerPoint{res: res, server: math.NaN(), client: math.NaN(), batch: math.NaN()}
	ops := float64(max(res.Ops, 1))
	if s0 >= 0 && s1 >= 0 {
		p.server = float64(s1-s0) / 1e3 / ops
	}
	if c0 >= 0 && c1 >= 0 {
		p.client = float64(c1-c0) / 1e3 / ops
	}
	switch {
	case s.batch != nil:
		t1, g1 := s.batch()
		if t1 > t0 {
			p.batch = float64(g1-g0) / float64(t1-t0)
		}
	case s.peer != "":
		p.batch = 1
	}
	return p, nil
}

// best returns the fastest row of peer at t tasks (by median rate)
// among its batched or unbatched rows, or either; nil if none.
func (k *kvPeersRun) best(peer string, t int, batched, either bool) *peerSys {
	var b *peerSys
	for _, s := range k.sys {
		if s.peer != peer || len(s.pts[t]) == 0 || (!either && s.batched != batched) {
			continue
		}
		if b == nil || s.median(t, rateOf) > b.median(t, rateOf) {
			b = s
		}
	}
	return b
}

func (k *kvPeersRun) rows() {
	num := func(x float64) any {
		if math.IsNaN(x) {
			return nil
		}
		return x
	}
	for _, t := range k.tasks {
		mc, rd := k.best("memcached", t, false, true), k.best("Redis", t, false, true)
		for _, s := range k.sys {
			if len(s.pts[t]) == 0 {
				continue
			}
			rate := s.median(t, rateOf)
			var runs []string
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, p := range s.pts[t] {
				runs = append(runs, fmt.Sprintf("%.3f", rateOf(p)))
				lo, hi = min(lo, rateOf(p)), max(hi, rateOf(p))
			}
			ratio := func(b *peerSys) any {
				if b == nil {
					return nil
				}
				return rate / b.median(t, rateOf)
			}
			var batch any = num(s.median(t, func(p peerPoint) float64 { return p.batch }))
			if s.transport == "shm" {
				batch = "loads"
			}
			conns := len(s.dbs[t])
			if s.conns > 0 {
				conns = s.conns
			}
			k.r.AddRow(s.name, s.transport, t, conns, batch, rate, strings.Join(runs, " / "), 100*(hi-lo)/rate,
				s.median(t, func(p peerPoint) float64 { return us(p.res.P50) }), s.median(t, func(p peerPoint) float64 { return us(p.res.P99) }),
				num(s.median(t, func(p peerPoint) float64 { return p.server })), num(s.median(t, func(p peerPoint) float64 { return p.client })),
				ratio(mc), ratio(rd))
		}
	}
}

// versus states a's median rate over b's at t tasks, and the ratio of
// every round.
func versus(a, b *peerSys, t int) string {
	if a == nil || b == nil || len(a.pts[t]) == 0 || len(b.pts[t]) == 0 {
		return "n/a"
	}
	var per []string
	for i := range min(len(a.pts[t]), len(b.pts[t])) {
		per = append(per, fmt.Sprintf("%.2f×", rateOf(a.pts[t][i])/rateOf(b.pts[t][i])))
	}
	return fmt.Sprintf("**%.2f×** vs %s (rounds: %s)", a.median(t, rateOf)/b.median(t, rateOf), b.name, strings.Join(per, ", "))
}

func (k *kvPeersRun) notes(point time.Duration, rounds int, batch map[int]int) {
	n := &k.r.Notes
	*n = append(*n, k.skipped...)
	if len(k.retried) > 0 {
		*n = append(*n, "Loading lost its connection and ran again on a new one: "+strings.Join(k.retried, "; ")+".")
	}
	last := k.tasks[len(k.tasks)-1]
	if s := k.find("prism-kv", "tcp"); s != nil {
		*n = append(*n, fmt.Sprintf("Equal batching, %d tasks: PRISM-KV over tcp %s; %s.", last,
			versus(s, k.best("memcached", last, true, false), last), versus(s, k.best("Redis", last, true, false), last)))
	}
	for _, t := range k.tasks {
		for _, d := range []string{"prism-kv", "smart-ht"} {
			if s := k.find(d, "shm"); s != nil {
				*n = append(*n, fmt.Sprintf("shm, %d tasks: %s %s; %s.", t, d,
					versus(s, k.best("memcached", t, false, true), t), versus(s, k.best("Redis", t, false, true), t)))
			}
		}
	}
	var bs []string
	for _, t := range k.tasks {
		bs = append(bs, fmt.Sprintf("%d at %d tasks", batch[t], t))
	}
	*n = append(*n,
		fmt.Sprintf("YCSB-C (100%% reads, uniform keys) from go-ycsb v1.0.1 over %d records of %d bytes, the same for every system; tasks is the client goroutines, so as many GETs in flight. All systems are started and loaded first, then run in turn for %v each, %d round(s); every figure is the median of the rounds, runs lists each round's rate and spread is (max−min)/median.", k.records, k.value, point, rounds),
		"Every server runs in its own process: memcached and Redis as installed, each rdmakit node as `rdmakit kv serve --store S --device D --listen 127.0.0.1:0` with a random token (started from this binary, stopped at the end), the clients all in this process. The tcp nodes' device is `"+kvServeTCP+"` (the soft NIC parks instead of polling, docs/kv.md's rule for busy cores); memcached and Redis wait in epoll.",
		"batch is GETs per round trip: for rdmakit over tcp, requests per write(2) of the client's device (tcp.Batching; requests from all tasks that queued while the previous write was out); for the batched peers, keys per multi-get / MGET actually sent. The batched rows' cap B is PRISM-KV's measured batch over tcp in a warm-up run ("+strings.Join(bs, ", ")+"), with ⌊tasks/B⌋ connections of one round trip in flight each (conns), the tasks spread evenly over them: as many GETs in flight as unbatched, and a request can carry all its connection's tasks' GETs, at least B — the peers are never held to fewer keys per round trip than rdmakit's frames carry. Unbatched peers: one connection per task, one GET per round trip. For rdmakit, conns counts every connection of the client to its node (Smart-HT's runtime workers', and over shm the slots' own).",
		"server_cpu is the server process's utime+stime (/proc/PID/stat, all threads, 10 ms ticks) over the run, divided by the operations; client_cpu the same for this process, which holds every client (and the idle clients of the other systems). Over shm a GET is loads from the node's memory mapped into the client: the node's CPU stays near 0, the work moves to the client.",
		"vs_memcached and vs_redis divide by the fastest memcached row (any thread count, unbatched or multi-get) and the fastest Redis row at the same task count.",
	)
	// memcached's thread counts, measured.
	for _, t := range k.tasks {
		var parts []string
		for _, s := range k.sys {
			if s.peer == "memcached" && len(s.pts[t]) > 0 {
				parts = append(parts, fmt.Sprintf("%s %.3f", s.name, s.median(t, rateOf)))
			}
		}
		if b := k.best("memcached", t, false, true); b != nil {
			*n = append(*n, fmt.Sprintf("memcached threads at %d tasks (Mops): %s; fastest: %s.", t, strings.Join(parts, ", "), b.name))
		}
	}
	*n = append(*n, "Asymmetries left: (1) rdmakit's tasks share one connection per client over tcp (Smart-HT adds its runtime's worker connections, one per core), with several writes in flight on it; over shm each of PRISM-KV's 64 slots has a connection of its own (a QP and CQ only its task uses, as each unbatched peer task has its own connection), so a GET completes on its task's goroutine; the batched peers keep one round trip in flight per connection and carry at least rdmakit's mean batch (more when the tasks do not divide evenly: compare the batch column), not its distribution. "+
		"(2) The clients differ in work: an rdmakit client hashes, probes and checks (client_cpu), a memcached/Redis client here is a small Go text/RESP client written for this benchmark, not libmemcached or hiredis; every system's GETs come from the same go-ycsb workload through the same adapter (workload.DB, no allocation per GET). "+
		"(3) Redis runs its commands on one thread; the batched Redis row uses MGET (one command per round trip, its cheapest form) rather than pipelined GETs. "+
		"(4) Over shm the clients read the node's memory directly: same host only, and the nodes' CPU is idle by construction (what server_cpu still shows is PRISM-KV's restock timer, every 200 µs, the liveness probes and the 10 ms tick). "+
		"(5) The machine's two cores are shared by every server and the clients; the idle systems' processes sleep meanwhile (each rdmakit node probes its clients every 5 s).")
}
