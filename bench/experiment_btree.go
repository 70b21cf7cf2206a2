package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/bench/peers"
	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/btree/rpctree"
	"github.com/rdmakit/rdmakit/btree/sherman"
	"github.com/rdmakit/rdmakit/workload"
)

func init() {
	Register(Experiment{
		Name: "btree-ycsb",
		Description: "ordered indexes on YCSB C, B, A (zipf 0.99), fixed 100-key scans and E (scans up to 100 keys), 8-byte keys and values: " +
			"Sherman (one-sided, memory node a process over tcp), Sherman+ and Smart-BT (Sherman on Smart's runtime: no technique, every technique, each alone) " +
			"next to a Redis sorted set and an RPC B-tree (google/btree behind rpc, a process); throughput, p50, p99, round trips and bytes per operation",
		Run: runBTreeYCSB,
	})
}

var btreeColumns = []Column{
	{Name: "system"}, {Name: "workload"}, {Name: "tasks"},
	{Name: "rate", Unit: "Mops"}, {Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"},
	{Name: "trips", Unit: "/op"}, {Name: "bytes", Unit: "B/op"},
	{Name: "server_cpu", Unit: "µs/op"}, {Name: "vs_sherman", Unit: "×"}, {Name: "vs_redis", Unit: "×"}, {Name: "vs_rpc", Unit: "×"},
}

// btreeWorkloads are btree-ycsb's workloads, in the order they run on
// one loaded tree: YCSB C, B, A, then S100 (scans of exactly 100 keys
// from a zipfian key, no writes) and YCSB E last, since its inserts grow
// the trees.
var btreeWorkloads = []string{"C", "B", "A", "S100", "E"}

// btreeYCSB is workload w's generator over records.
func btreeYCSB(w string, records int64) *workload.TreeYCSB {
	if w == "S100" {
		return &workload.TreeYCSB{Workload: "scan", ScanLength: 100, Records: records}
	}
	return &workload.TreeYCSB{Workload: strings.ToLower(w), Records: records}
}

// btreeTasks are the client concurrencies: operations in flight.
var btreeTasks = []int{8, 32}

// btreeSmartWorkers is the workers of the Smart rows' clients (the
// machine's 2 cores); a point of t tasks runs t/btreeSmartWorkers
// operations per worker, so t in flight as for every other row.
const btreeSmartWorkers = 2

// btreeLayout is the Sherman node layout of btree-ycsb: 8-byte keys and
// values, Sherman's default fan-outs.
var btreeLayout = sherman.Layout{KeySize: 8, ValueSize: 8}

// Row names that notes and ratios refer to.
const (
	btreeSherman = "Sherman"
	btreeSmartBT = "Smart-BT"
	btreeRedis   = "Redis sorted set"
	btreeRPC     = "RPC B-tree"
)

// treeClient is a measured client: a tree and its counters so far.
type treeClient struct {
	btree.Tree
	// counters returns the client's round trips and the bytes it
	// received (bytes: see the notes per system; 0 when the node's
	// figure is used).
	counters func() (trips, bytes uint64)
}

// btreeConfig is one row source of an rdmakit design: the node it is a
// client of (`rdmakit btree serve --design`; the rows of a design share
// one node and its tree) and how a client of the row is dialed.
type btreeConfig struct {
	name   string
	design string
	// dial dials a client for tasks operations in flight.
	dial func(ctx context.Context, n *Server, tasks int) (treeClient, error)
	// perTasks gives the row a client per task count (Smart's workers ×
	// tasks per worker make the count); otherwise one client, dialed for
	// the most tasks, serves every point.
	perTasks bool
}

// btreeConfigs are the rdmakit rows of btree-ycsb: Sherman, Sherman+
// (Smart's runtime, no technique), Smart-BT (every technique), each
// technique alone (named as sherman.Technique names it), the RPC B-tree.
var btreeConfigs = func() []btreeConfig {
	cs := []btreeConfig{
		{name: btreeSherman, design: "sherman", dial: dialShermanRow(nil)},
		{name: "Sherman+", design: "sherman", dial: dialShermanRow(&sherman.SmartConfig{}), perTasks: true},
		{name: btreeSmartBT, design: "sherman", dial: dialShermanRow(&sherman.SmartConfig{Techniques: sherman.AllTechniques}), perTasks: true},
	}
	for _, t := range []sherman.Technique{sherman.Throttling, sherman.Backoff, sherman.CoroutineThrottle, sherman.SpecLookup} {
		cs = append(cs, btreeConfig{name: t.String(), design: "sherman", dial: dialShermanRow(&sherman.SmartConfig{Techniques: t}), perTasks: true})
	}
	return append(cs, btreeConfig{name: btreeRPC, design: "rpc", dial: dialRPCRow})
}()

// dialShermanRow dials a Sherman client (btreeLayout) for tasks in
// flight: plain Sherman with a slot per task when sc is nil, else on
// Smart's runtime with sc's techniques, btreeSmartWorkers workers and
// tasks/btreeSmartWorkers tasks each. The bytes are the memory node's
// (nodeBytes).
func dialShermanRow(sc *sherman.SmartConfig) func(ctx context.Context, n *Server, tasks int) (treeClient, error) {
	return func(ctx context.Context, n *Server, tasks int) (treeClient, error) {
		cfg := sherman.Config{Layout: btreeLayout, Slots: tasks}
		if sc != nil {
			c := *sc
			c.Workers, c.Tasks = btreeSmartWorkers, max(1, tasks/btreeSmartWorkers)
			cfg.Smart = &c
		}
		c, err := sherman.Dial(ctx, sherman.DialConfig{Config: cfg, Device: kvNodeURI + "&token=" + n.Token, Nodes: []string{n.Addr}, Token: n.Token})
		if err != nil {
			return treeClient{}, err
		}
		return treeClient{Tree: c, counters: func() (uint64, uint64) { return c.Stats().RoundTrips, 0 }}, nil
	}
}

// dialRPCRow dials the RPC B-tree's client: one connection of tasks
// call slots.
func dialRPCRow(ctx context.Context, n *Server, tasks int) (treeClient, error) {
	c, err := rpctree.Dial(ctx, rpctree.DialConfig{Device: kvNodeURI + "&token=" + n.Token, Node: n.Addr, Token: n.Token, Slots: tasks})
	if err != nil {
		return treeClient{}, err
	}
	return treeClient{Tree: c, counters: func() (uint64, uint64) { s := c.Stats(); return s.RoundTrips, s.BytesRead }}, nil
}

// btreeNode is one server of a run and its tree, which every row of its
// design measures.
type btreeNode struct {
	pid       int
	nodeBytes func() (uint64, bool) // the memory node's served bytes (Sherman's design); nil otherwise
	e         *workload.TreeYCSB    // YCSB-E, kept so that its inserts add new keys at every point
}

// btreeSys is one row series of a run: its node, its clients and
// measured points.
type btreeSys struct {
	name     string
	node     *btreeNode
	dial     func(ctx context.Context, tasks int) (treeClient, error)
	perTasks bool
	clients  map[int]treeClient // by task count; the most tasks' serves every point without perTasks
	pts      map[string]map[int]btreePoint
}

// btreePoint is one measurement.
type btreePoint struct {
	res          workload.Result
	trips, bytes float64 // per operation; NaN when unknown
	server       float64 // µs of server CPU per operation; NaN when unknown
}

// btreeRun is the state of one btree-ycsb run.
type btreeRun struct {
	env     *Env
	r       *Result
	records int64
	point   time.Duration
	warm    time.Duration // YCSB-C on each client before its first point
	sys     []*btreeSys
	cleanup []func()
	skipped []string
}

func runBTreeYCSB(ctx context.Context, env *Env) (*Result, error) {
	records := int64(1_000_000)
	if env.Quick {
		records = 10_000
	}
	cfgs, redis, err := btreeSelect(env)
	if err != nil {
		return nil, err
	}
	point := env.PointDuration(2*time.Second, 200*time.Millisecond)
	b := &btreeRun{env: env, records: records, point: point, warm: point / 4,
		r: &Result{Name: "btree-ycsb", Title: "ordered indexes: Sherman and Smart-BT vs a Redis sorted set and an RPC B-tree (YCSB, every server its own process)",
			Columns: btreeColumns,
			Plots: []Plot{{Title: "throughput by workload, 32 tasks", X: "workload", Y: "rate", Series: []string{"system"},
				Where: map[string]string{"tasks": "32"}, Bars: true}}}}
	defer func() {
		for i := len(b.cleanup) - 1; i >= 0; i-- {
			b.cleanup[i]()
		}
	}()
	rows := len(cfgs)
	if redis {
		rows++
	}
	steps := 2 + rows*(1+len(btreeWorkloads)*len(btreeTasks))
	bar := env.Progress(steps, time.Duration(steps)*b.point, "btree-ycsb")
	defer bar.Finish()
	if err := b.addRows(ctx, cfgs, bar); err != nil {
		return nil, err
	}
	if redis {
		if err := b.addRedis(ctx); err != nil {
			return nil, err
		}
	}
	loaded := map[*btreeNode]bool{}
	for _, s := range b.sys {
		if !loaded[s.node] {
			if err := b.load(ctx, s); err != nil {
				return nil, err
			}
			loaded[s.node] = true
		}
		bar.Add(1)
	}
	for _, w := range btreeWorkloads {
		for _, t := range btreeTasks {
			for _, s := range b.sys {
				p, err := b.measure(ctx, s, w, t)
				if err != nil {
					return nil, err
				}
				if s.pts[w] == nil {
					s.pts[w] = map[int]btreePoint{}
				}
				s.pts[w][t] = p
				bar.Add(1)
			}
		}
	}
	b.rows()
	b.notes()
	b.r.Meta.Transport = "tcp"
	return b.r, nil
}

// btreeSelect returns the rdmakit rows env's Only keeps and whether it
// keeps Redis's (all without Only), or ErrNoSystem naming the choices
// when it keeps none.
func btreeSelect(env *Env) (cfgs []btreeConfig, redis bool, err error) {
	var names []string
	for _, c := range btreeConfigs {
		names = append(names, c.name)
		if env.Keeps(c.name, "") {
			cfgs = append(cfgs, c)
		}
	}
	names = append(names, btreeRedis)
	redis = env.Keeps(btreeRedis, "")
	if len(cfgs) == 0 && !redis {
		return nil, false, fmt.Errorf("%w: --only %s names none of btree-ycsb's systems (%s)", ErrNoSystem, strings.Join(env.Only, ","), strings.Join(names, ", "))
	}
	return cfgs, redis, nil
}

// addRows starts the node of each design that cfgs use (once; a design
// without the rdmakit command has no rows, the reason in the notes) and
// adds the rows of cfgs on them.
func (b *btreeRun) addRows(ctx context.Context, cfgs []btreeConfig, bar *Progress) error {
	nodes := map[string]*btreeNode{}
	servers := map[string]*Server{}
	for _, cfg := range cfgs {
		if _, ok := nodes[cfg.design]; !ok {
			n, srv, err := b.startNode(ctx, cfg.design)
			if errors.Is(err, ErrNoCommand) {
				b.skipped = append(b.skipped, "the "+cfg.design+" design's rows: none (the experiment runs `rdmakit btree serve`: run it through the rdmakit command).")
			} else if err != nil {
				return err
			}
			nodes[cfg.design], servers[cfg.design] = n, srv
			bar.Add(1)
		}
		if nodes[cfg.design] == nil {
			continue
		}
		dial, srv := cfg.dial, servers[cfg.design]
		b.sys = append(b.sys, &btreeSys{name: cfg.name, node: nodes[cfg.design], perTasks: cfg.perTasks,
			dial:    func(ctx context.Context, tasks int) (treeClient, error) { return dial(ctx, srv, tasks) },
			clients: map[int]treeClient{}, pts: map[string]map[int]btreePoint{}})
	}
	return nil
}

// startNode starts `rdmakit btree serve --design design` as a process.
func (b *btreeRun) startNode(ctx context.Context, design string) (*btreeNode, *Server, error) {
	metrics, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	// Room for the loaded keys, E's inserts (of every row) and half-full
	// leaves.
	mem := strconv.FormatInt(b.records*3/2*100+64<<20, 10)
	n, err := StartServer(ctx, b.env, "", "btree", "serve", "--design", design, "--device", kvServeTCP,
		"--listen", "127.0.0.1:0", "--metrics", metrics, "--mem", mem)
	if err != nil {
		return nil, nil, err
	}
	b.cleanup = append(b.cleanup, n.Stop)
	node := &btreeNode{pid: n.Pid()}
	if design == "sherman" {
		node.nodeBytes = func() (uint64, bool) { return scrapeCounter("http://"+metrics+"/metrics", "rdmakit_bytes_total") }
	}
	return node, n, nil
}

// addRedis starts Redis; its row's client has one connection per task
// of the most tasks.
func (b *btreeRun) addRedis(ctx context.Context) error {
	srv, err := peers.StartRedis(ctx)
	if errors.Is(err, peers.ErrNotInstalled) {
		b.skipped = append(b.skipped, fmt.Sprintf("Redis: no rows (%v).", err))
		return nil
	}
	if err != nil {
		return err
	}
	b.cleanup = append(b.cleanup, srv.Stop)
	b.sys = append(b.sys, &btreeSys{name: btreeRedis, node: &btreeNode{pid: srv.Pid()}, clients: map[int]treeClient{}, pts: map[string]map[int]btreePoint{},
		dial: func(ctx context.Context, tasks int) (treeClient, error) {
			t, err := peers.DialRedisTree(ctx, srv.Addr, "btree-ycsb", tasks)
			if err != nil {
				return treeClient{}, err
			}
			return treeClient{Tree: t, counters: func() (uint64, uint64) { s := t.Stats(); return s.RoundTrips, s.BytesRead }}, nil
		}})
	return nil
}

// load inserts the records into s's node from 8 tasks of a client of
// s's that is closed after (no measured client starts with the loader's
// caches).
func (b *btreeRun) load(ctx context.Context, s *btreeSys) error {
	c, err := b.dialTimed(ctx, s, 8)
	if err != nil {
		return err
	}
	defer c.Close()
	trees := make([]btree.Tree, 8)
	for i := range trees {
		trees[i] = c
	}
	if err := btreeYCSB("C", b.records).Load(ctx, trees); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return nil
}

// dialTimed dials a client of s for tasks, within 30 s.
func (b *btreeRun) dialTimed(ctx context.Context, s *btreeSys, tasks int) (treeClient, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := s.dial(dctx, tasks)
	if err != nil {
		return treeClient{}, fmt.Errorf("%s: %w", s.name, err)
	}
	return c, nil
}

// client returns s's client for t tasks, dialing it (and warming its
// caches with b.warm of YCSB-C) the first time.
func (b *btreeRun) client(ctx context.Context, s *btreeSys, t int) (treeClient, error) {
	if !s.perTasks {
		t = btreeTasks[len(btreeTasks)-1]
	}
	if c, ok := s.clients[t]; ok {
		return c, nil
	}
	c, err := b.dialTimed(ctx, s, t)
	if err != nil {
		return treeClient{}, err
	}
	b.cleanup = append(b.cleanup, func() { c.Close() })
	s.clients[t] = c
	y := btreeYCSB("C", b.records)
	y.Threads, y.Duration = t, b.warm
	wctx, cancel := context.WithTimeout(ctx, b.warm+kvPointGrace)
	defer cancel()
	if _, err := y.Run(wctx, []btree.Tree{c}); err != nil {
		return treeClient{}, fmt.Errorf("%s: warming up: %w", s.name, err)
	}
	return c, nil
}

// measure runs workload w at t tasks on s for a point.
func (b *btreeRun) measure(ctx context.Context, s *btreeSys, w string, t int) (btreePoint, error) {
	c, err := b.client(ctx, s, t)
	if err != nil {
		return btreePoint{}, err
	}
	cpu := func() time.Duration {
		d, err := ProcCPU(s.node.pid)
		if err != nil {
			return -1
		}
		return d
	}
	y := btreeYCSB(w, b.records)
	if w == "E" {
		if s.node.e == nil {
			s.node.e = y
		}
		y = s.node.e
	}
	y.Threads, y.Duration = t, b.point
	trips0, bytes0 := c.counters()
	var node0 uint64
	var nodeOK bool
	if s.node.nodeBytes != nil {
		node0, nodeOK = s.node.nodeBytes()
	}
	c0 := cpu()
	rctx, cancel := context.WithTimeout(ctx, b.point+kvPointGrace)
	res, err := y.Run(rctx, []btree.Tree{c})
	cancel()
	c1 := cpu()
	if err == nil && res.Errors > 0 {
		err = fmt.Errorf("%d operations failed, the first: %w", res.Errors, res.FirstErr)
	}
	if err != nil {
		return btreePoint{}, fmt.Errorf("%s, %s, %d tasks: %w", s.name, w, t, err)
	}
	trips1, bytes1 := c.counters()
	ops := float64(max(res.Ops, 1))
	p := btreePoint{res: res, trips: float64(trips1-trips0) / ops, bytes: float64(bytes1-bytes0) / ops, server: math.NaN()}
	if s.node.nodeBytes != nil {
		p.bytes = math.NaN()
		if node1, ok := s.node.nodeBytes(); ok && nodeOK {
			p.bytes = float64(node1-node0) / ops
		}
	}
	if c0 >= 0 && c1 >= 0 {
		p.server = float64(c1-c0) / 1e3 / ops
	}
	return p, nil
}

// find returns the system named name, nil if it has no rows.
func (b *btreeRun) find(name string) *btreeSys {
	for _, s := range b.sys {
		if s.name == name {
			return s
		}
	}
	return nil
}

// over is s's rate over o's at workload w and t tasks; NaN when either
// has no rows.
func (s *btreeSys) over(o *btreeSys, w string, t int) float64 {
	if s == nil || o == nil {
		return math.NaN()
	}
	return s.pts[w][t].res.Rate() / o.pts[w][t].res.Rate()
}

func (b *btreeRun) rows() {
	num := func(x float64) any {
		if math.IsNaN(x) {
			return nil
		}
		return x
	}
	sherman, redis, rpc := b.find(btreeSherman), b.find(btreeRedis), b.find(btreeRPC)
	for _, w := range btreeWorkloads {
		for _, t := range btreeTasks {
			for _, s := range b.sys {
				p := s.pts[w][t]
				b.r.AddRow(s.name, w, t, p.res.Rate()/1e6, us(p.res.P50), us(p.res.P99),
					num(p.trips), num(p.bytes), num(p.server), num(s.over(sherman, w, t)), num(s.over(redis, w, t)), num(s.over(rpc, w, t)))
			}
		}
	}
}

// ratioText is "N.NN× NAME", or "" when either has no rows or they
// are one.
func ratioText(s, o *btreeSys, w string, t int) string {
	r := s.over(o, w, t)
	if math.IsNaN(r) || s == o {
		return ""
	}
	return fmt.Sprintf("%.2f× %s", r, o.name)
}

func (b *btreeRun) notes() {
	n := &b.r.Notes
	*n = append(*n, b.skipped...)
	last := btreeTasks[len(btreeTasks)-1]
	sherman, smartBT, redis, rpc := b.find(btreeSherman), b.find(btreeSmartBT), b.find(btreeRedis), b.find(btreeRPC)
	join := func(parts ...string) string {
		var out []string
		for _, p := range parts {
			if p != "" {
				out = append(out, p)
			}
		}
		return strings.Join(out, ", ")
	}
	if smartBT != nil && sherman != nil {
		*n = append(*n, fmt.Sprintf("Smart-BT against Sherman at %d tasks over tcp, same run: YCSB-B %s, YCSB-C %s (the target is ≥ 1.5× on both).",
			last, ratioText(smartBT, sherman, "B", last), ratioText(smartBT, sherman, "C", last)))
	}
	if smartBT != nil && (redis != nil || rpc != nil) {
		*n = append(*n, fmt.Sprintf("Smart-BT point reads (YCSB-C) at %d tasks, same run: %s (the target is ≥ 2× each).",
			last, join(ratioText(smartBT, redis, "C", last), ratioText(smartBT, rpc, "C", last))))
	}
	if redis != nil {
		for _, s := range []*btreeSys{smartBT, sherman} {
			if s != nil {
				*n = append(*n, fmt.Sprintf("%s's 100-key scans (S100) at %d tasks, same run: %s's ZRANGEBYLEX (the target is ≥ 1×).",
					s.name, last, ratioText(s, redis, "S100", last)))
			}
		}
	}
	for _, s := range b.sys {
		if s == redis || s == rpc {
			continue
		}
		var parts []string
		for _, w := range btreeWorkloads {
			if p := join(ratioText(s, sherman, w, last), ratioText(s, redis, w, last), ratioText(s, rpc, w, last)); p != "" {
				parts = append(parts, w+": "+p)
			}
		}
		if len(parts) > 0 {
			*n = append(*n, fmt.Sprintf("%s at %d tasks, same run: %s.", s.name, last, strings.Join(parts, "; ")))
		}
	}
	*n = append(*n,
		fmt.Sprintf("Workloads on %d records: YCSB C (reads), B (95%% reads, 5%% updates) and A (50/50) with scrambled zipfian 0.99 keys; S100, scans of exactly 100 keys from a zipfian key (workload.TreeYCSB's \"scan\"; fewer only where the key space ends), nothing written; then YCSB E (95%% scans of 1 to 100 keys from a zipfian key, 5%% inserts of new keys; last, since it grows the trees). Keys are 8 bytes (FNV-64 of the record number, big-endian), values 8 bytes. Every server's tree is loaded first by 8 tasks of a client closed after; each client then runs YCSB-C for %v unmeasured (warm caches) before its first point, and each point runs %v; tasks is the goroutines, so the operations in flight.", b.records, b.warm, b.point),
		"Processes: the memory node of every Sherman row and the RPC B-tree are `rdmakit btree serve --design sherman|rpc --device "+kvServeTCP+"` (random token), Redis is redis-server without persistence; every client is in this process. Sherman, Sherman+, Smart-BT and the techniques alone are clients of one memory node and one tree (points run one at a time).",
		fmt.Sprintf("Clients: Sherman's tasks share one client (one QP to the node, 32 slots, its local lock table); Sherman+, Smart-BT and each technique alone (throttling, backoff, coroutine-throttle, spec-lookup: sherman.SmartConfig's Techniques) have a client per task count, of %d workers (their own QPs and CQs) × tasks/%d tasks per worker, so as many operations in flight as tasks (the tuner picks the throttle's bound); the RPC B-tree's one connection of 32 call slots; Redis's 32 connections (one per task at 32; at 8 tasks, 8 of them in use).", btreeSmartWorkers, btreeSmartWorkers),
		"Sherman's layout: 8-byte keys and values, leaves of 16 entries, internal nodes of 32; the client caches internal nodes, so a warm Get is one READ of a leaf (with spec-lookup, of one leaf entry when its cached position holds). The RPC B-tree is github.com/google/btree (degree 32) under one read-write lock in the server. Redis holds the tree as one sorted set of members escaped-key·NUL·value at score 0 (ZRANGEBYLEX, ZREMRANGEBYLEX, ZADD; an update is MULTI·ZREMRANGEBYLEX·ZADD·EXEC in one write, atomic and one round trip).",
		"trips is round trips per operation: Sherman's post lists (a Get is 1 when its cache is warm; a Put takes the lock CAS, the leaf READ and the write-back with the unlock, 3, or 2 when a task of the process handed the lock over), an RPC call each, a Redis write (MULTI's four commands are one). A scan is one operation: Sherman reads leaf after leaf, the RPC tree answers pages of up to 16 KiB, Redis pages of 256 members.",
		"bytes is per operation: for every Sherman row (Smart ones too) the payload the memory node's soft NIC served over the point (rdmakit_bytes_total from its /metrics: leaf, leaf-entry and internal-node READs, plus the WRITEs and atomics of updates — on C and S100 all of it is READs), not the client's sherman Stats.BytesRead; for the RPC B-tree the response payloads the client received; for Redis the bytes the client read from its sockets (RESP framing included).",
		"server_cpu is the server process's utime+stime (/proc/PID/stat) over the point, per operation: Sherman's memory node takes no part in an operation (its soft NIC does, as a NIC would), the RPC B-tree's and Redis's CPUs do all of the tree's work. vs_sherman, vs_redis and vs_rpc are the row's rate over that system's at the same point.",
		"The machine's 2 cores are shared by the servers and the client: the client's own CPU is the first bottleneck of the one-sided rows, so compare rows within one run, not with the papers' absolute figures.",
	)
}

// freePort returns a free loopback address for a server to listen on.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// scrapeCounter reads one counter from a Prometheus text endpoint.
func scrapeCounter(url, name string) (uint64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return uint64(f), err == nil
		}
	}
	return 0, false
}
