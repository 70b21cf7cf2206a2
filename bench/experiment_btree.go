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
		Description: "ordered indexes on YCSB C, B, A (zipf 0.99) and E (scans up to 100 keys), 8-byte keys and values: " +
			"Sherman (one-sided, memory node a process over tcp) next to a Redis sorted set and an RPC B-tree (google/btree behind rpc, a process); " +
			"throughput, p50, p99, round trips and bytes per operation",
		Run: runBTreeYCSB,
	})
}

var btreeColumns = []Column{
	{Name: "system"}, {Name: "workload"}, {Name: "tasks"},
	{Name: "rate", Unit: "Mops"}, {Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"},
	{Name: "trips", Unit: "/op"}, {Name: "bytes", Unit: "B/op"},
	{Name: "server_cpu", Unit: "µs/op"}, {Name: "vs_redis", Unit: "×"}, {Name: "vs_rpc", Unit: "×"},
}

// btreeWorkloads are btree-ycsb's YCSB workloads, in the order they run
// on one loaded tree (E's inserts last).
var btreeWorkloads = []string{"c", "b", "a", "e"}

// btreeTasks are the client concurrencies: operations in flight.
var btreeTasks = []int{8, 32}

// btreeLayout is the Sherman node layout of btree-ycsb: 8-byte keys and
// values, Sherman's default fan-outs.
var btreeLayout = sherman.Layout{KeySize: 8, ValueSize: 8}

// treeClient is a measured client: a tree and its counters so far.
type treeClient struct {
	btree.Tree
	// counters returns the client's round trips and the bytes it
	// received (bytes: see the notes per system; nil when unknown).
	counters func() (trips, bytes uint64)
}

// btreeConfig is one row source of an rdmakit design: the node it
// serves (`rdmakit btree serve --design`) and how a client of the
// configuration is dialed. Smart-BT's configurations join this table.
type btreeConfig struct {
	name   string
	design string
	dial   func(ctx context.Context, n *Server, slots int) (treeClient, error)
}

// btreeConfigs are the rdmakit rows of btree-ycsb.
var btreeConfigs = []btreeConfig{
	{name: "Sherman", design: "sherman", dial: dialShermanRow(sherman.Config{})},
}

// dialShermanRow dials a Sherman client of cfg (btreeLayout, slots for
// every task); the bytes are the memory node's (nodeBytes).
func dialShermanRow(cfg sherman.Config) func(ctx context.Context, n *Server, slots int) (treeClient, error) {
	return func(ctx context.Context, n *Server, slots int) (treeClient, error) {
		cfg.Layout, cfg.Slots = btreeLayout, slots
		c, err := sherman.Dial(ctx, sherman.DialConfig{Config: cfg, Device: kvNodeURI + "&token=" + n.Token, Nodes: []string{n.Addr}, Token: n.Token})
		if err != nil {
			return treeClient{}, err
		}
		return treeClient{Tree: c, counters: func() (uint64, uint64) { return c.Stats().RoundTrips, 0 }}, nil
	}
}

// btreeSys is one system of a run: its client and measured points.
type btreeSys struct {
	name      string
	pid       int
	c         treeClient
	nodeBytes func() (uint64, bool) // the memory node's served bytes (Sherman rows)
	e         *workload.TreeYCSB    // YCSB-E, kept so that its inserts add new keys at every point
	pts       map[string]map[int]btreePoint
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
	sys     []*btreeSys
	cleanup []func()
	skipped []string
}

func runBTreeYCSB(ctx context.Context, env *Env) (*Result, error) {
	records := int64(1_000_000)
	if env.Quick {
		records = 10_000
	}
	b := &btreeRun{env: env, records: records, point: env.PointDuration(2*time.Second, 200*time.Millisecond),
		r: &Result{Name: "btree-ycsb", Title: "ordered indexes: Sherman vs a Redis sorted set and an RPC B-tree (YCSB, every server its own process)",
			Columns: btreeColumns,
			Plots: []Plot{{Title: "throughput by workload, 32 tasks", X: "workload", Y: "rate", Series: []string{"system"},
				Where: map[string]string{"tasks": "32"}, Bars: true}}}}
	defer func() {
		for i := len(b.cleanup) - 1; i >= 0; i-- {
			b.cleanup[i]()
		}
	}()
	steps := (len(btreeConfigs)+2)*(1+len(btreeWorkloads)*len(btreeTasks)) + 1
	bar := env.Progress(steps, time.Duration(steps)*b.point, "btree-ycsb")
	defer bar.Finish()
	for _, cfg := range btreeConfigs {
		if err := b.addNode(ctx, cfg.name, cfg.design, cfg.dial); err != nil {
			return nil, err
		}
		bar.Add(1)
	}
	if err := b.addNode(ctx, "RPC B-tree", "rpc", dialRPCRow); err != nil {
		return nil, err
	}
	bar.Add(1)
	if err := b.addRedis(ctx); err != nil {
		return nil, err
	}
	bar.Add(1)
	for _, s := range b.sys {
		if err := b.load(ctx, s); err != nil {
			return nil, err
		}
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

// dialRPCRow dials the RPC B-tree's client.
func dialRPCRow(ctx context.Context, n *Server, slots int) (treeClient, error) {
	c, err := rpctree.Dial(ctx, rpctree.DialConfig{Device: kvNodeURI + "&token=" + n.Token, Node: n.Addr, Token: n.Token, Slots: slots})
	if err != nil {
		return treeClient{}, err
	}
	return treeClient{Tree: c, counters: func() (uint64, uint64) { s := c.Stats(); return s.RoundTrips, s.BytesRead }}, nil
}

// addNode starts `rdmakit btree serve --design design` as a process and
// dials the row's client, which all tasks share.
func (b *btreeRun) addNode(ctx context.Context, name, design string, dial func(context.Context, *Server, int) (treeClient, error)) error {
	metrics, err := freePort()
	if err != nil {
		return err
	}
	// Room for the loaded keys, E's inserts and half-full leaves.
	mem := strconv.FormatInt(b.records*3/2*100+32<<20, 10)
	n, err := StartServer(ctx, b.env, "", "btree", "serve", "--design", design, "--device", kvServeTCP,
		"--listen", "127.0.0.1:0", "--metrics", metrics, "--mem", mem)
	if errors.Is(err, ErrNoCommand) {
		b.skipped = append(b.skipped, name+": no rows (the experiment runs `rdmakit btree serve`: run it through the rdmakit command).")
		return nil
	}
	if err != nil {
		return err
	}
	b.cleanup = append(b.cleanup, n.Stop)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := dial(dctx, n, btreeTasks[len(btreeTasks)-1])
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	b.cleanup = append(b.cleanup, func() { c.Close() })
	s := &btreeSys{name: name, pid: n.Pid(), c: c, pts: map[string]map[int]btreePoint{}}
	if design == "sherman" {
		s.nodeBytes = func() (uint64, bool) { return scrapeCounter("http://"+metrics+"/metrics", "rdmakit_bytes_total") }
	}
	b.sys = append(b.sys, s)
	return nil
}

// addRedis starts Redis and dials a tree of one connection per task.
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
	t, err := peers.DialRedisTree(ctx, srv.Addr, "btree-ycsb", btreeTasks[len(btreeTasks)-1])
	if err != nil {
		return fmt.Errorf("redis sorted set: %w", err)
	}
	b.cleanup = append(b.cleanup, func() { t.Close() })
	b.sys = append(b.sys, &btreeSys{name: "Redis sorted set", pid: srv.Pid(), pts: map[string]map[int]btreePoint{},
		c: treeClient{Tree: t, counters: func() (uint64, uint64) { s := t.Stats(); return s.RoundTrips, s.BytesRead }}})
	return nil
}

// load inserts the records into s from 8 tasks.
func (b *btreeRun) load(ctx context.Context, s *btreeSys) error {
	y := workload.TreeYCSB{Workload: "c", Records: b.records}
	trees := make([]btree.Tree, 8)
	for i := range trees {
		trees[i] = s.c
	}
	if err := y.Load(ctx, trees); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return nil
}

// measure runs workload w at t tasks on s for a point.
func (b *btreeRun) measure(ctx context.Context, s *btreeSys, w string, t int) (btreePoint, error) {
	cpu := func() time.Duration {
		d, err := ProcCPU(s.pid)
		if err != nil {
			return -1
		}
		return d
	}
	y := &workload.TreeYCSB{Workload: w, Records: b.records, Threads: t, Duration: b.point}
	if w == "e" {
		if s.e == nil {
			s.e = y
		}
		y = s.e
		y.Threads = t
	}
	trips0, bytes0 := s.c.counters()
	var node0 uint64
	var nodeOK bool
	if s.nodeBytes != nil {
		node0, nodeOK = s.nodeBytes()
	}
	c0 := cpu()
	rctx, cancel := context.WithTimeout(ctx, b.point+kvPointGrace)
	res, err := y.Run(rctx, []btree.Tree{s.c})
	cancel()
	c1 := cpu()
	if err == nil && res.Errors > 0 {
		err = fmt.Errorf("%d operations failed, the first: %w", res.Errors, res.FirstErr)
	}
	if err != nil {
		return btreePoint{}, fmt.Errorf("%s, YCSB-%s, %d tasks: %w", s.name, strings.ToUpper(w), t, err)
	}
	trips1, bytes1 := s.c.counters()
	ops := float64(max(res.Ops, 1))
	p := btreePoint{res: res, trips: float64(trips1-trips0) / ops, bytes: float64(bytes1-bytes0) / ops, server: math.NaN()}
	if s.nodeBytes != nil {
		p.bytes = math.NaN()
		if node1, ok := s.nodeBytes(); ok && nodeOK {
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

func (b *btreeRun) rows() {
	num := func(x float64) any {
		if math.IsNaN(x) {
			return nil
		}
		return x
	}
	redis, rpc := b.find("Redis sorted set"), b.find("RPC B-tree")
	for _, w := range btreeWorkloads {
		for _, t := range btreeTasks {
			ratio := func(p btreePoint, o *btreeSys) any {
				if o == nil {
					return nil
				}
				return p.res.Rate() / o.pts[w][t].res.Rate()
			}
			for _, s := range b.sys {
				p := s.pts[w][t]
				b.r.AddRow(s.name, strings.ToUpper(w), t, p.res.Rate()/1e6, us(p.res.P50), us(p.res.P99),
					num(p.trips), num(p.bytes), num(p.server), ratio(p, redis), ratio(p, rpc))
			}
		}
	}
}

func (b *btreeRun) notes() {
	n := &b.r.Notes
	*n = append(*n, b.skipped...)
	last := btreeTasks[len(btreeTasks)-1]
	redis, rpc := b.find("Redis sorted set"), b.find("RPC B-tree")
	for _, cfg := range btreeConfigs {
		s := b.find(cfg.name)
		if s == nil {
			continue
		}
		var parts []string
		for _, w := range btreeWorkloads {
			part := "YCSB-" + strings.ToUpper(w) + ":"
			for _, o := range []*btreeSys{redis, rpc} {
				if o != nil {
					part += fmt.Sprintf(" %.2f× %s", s.pts[w][last].res.Rate()/o.pts[w][last].res.Rate(), o.name)
				}
			}
			parts = append(parts, part)
		}
		*n = append(*n, fmt.Sprintf("%s at %d tasks: %s.", s.name, last, strings.Join(parts, "; ")))
	}
	*n = append(*n,
		fmt.Sprintf("YCSB core workloads on %d records: C (reads), B (95%% reads, 5%% updates) and A (50/50) with scrambled zipfian 0.99 keys, then E (95%% scans of 1 to 100 keys from a zipfian key, 5%% inserts of new keys; last, since it grows the trees). Keys are 8 bytes (FNV-64 of the record number, big-endian), values 8 bytes (workload.TreeYCSB). Every system is loaded first by 8 tasks, then each point runs %v; tasks is the goroutines, so the operations in flight.", b.records, b.point),
		"Processes: Sherman's memory node and the RPC B-tree are `rdmakit btree serve --design sherman|rpc --device "+kvServeTCP+"` (random token), Redis is redis-server without persistence; every client is in this process. Sherman's tasks share one client (one QP to the node, its local lock table), the RPC B-tree's one connection of 32 call slots, Redis's 32 connections (one per task at 32; at 8 tasks, 8 of them in use).",
		"Sherman's layout: 8-byte keys and values, leaves of 16 entries, internal nodes of 32; the client caches internal nodes, so a warm Get is one READ of a leaf. The RPC B-tree is github.com/google/btree (degree 32) under one read-write lock in the server. Redis holds the tree as one sorted set of members escaped-key·NUL·value at score 0 (ZRANGEBYLEX, ZREMRANGEBYLEX, ZADD; an update is MULTI·ZREMRANGEBYLEX·ZADD·EXEC in one write, atomic and one round trip).",
		"trips is round trips per operation: Sherman's post lists (a Get is 1 when its cache is warm; a Put takes the lock CAS, the leaf READ and the write-back with the unlock, 3, or 2 when a task of the process handed the lock over), an RPC call each, a Redis write (MULTI's four commands are one). A scan is one operation: Sherman reads leaf after leaf, the RPC tree answers pages of up to 16 KiB, Redis pages of 256 members.",
		"bytes is per operation: for Sherman the payload the memory node's soft NIC served (rdmakit_bytes_total from its /metrics: leaf and internal-node READs, plus the WRITEs and atomics of updates — on C all of it is READs); for the RPC B-tree the response payloads the client received; for Redis the bytes the client read from its sockets (RESP framing included).",
		"server_cpu is the server process's utime+stime (/proc/PID/stat) over the point, per operation: Sherman's memory node takes no part in an operation (its soft NIC does, as a NIC would), the RPC B-tree's and Redis's CPUs do all of the tree's work.",
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
