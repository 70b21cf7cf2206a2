package objexp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/stats"
	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/node"
	"github.com/rdmakit/rdmakit/objstore/object"
)

func init() {
	bench.Register(bench.Experiment{
		Name: "objstore-fetch",
		Description: "cross-store fetch of 1 KiB to 16 MiB objects between two store processes (the Plasma thesis' §4): " +
			"TCP4K, TCPBulk, SendRecv, Read and Hybrid over the tcp and shm verbs transports, and Redis GET — latency, GB/s, bytes copied and CPU per object",
		Run: runFetch,
	})
}

// The fetcher's protocols of objstore-fetch (the names `rdmakit objstore
// serve --protocol` takes) and Redis.
const (
	sysTCP4K    = "tcp4k"
	sysTCPBulk  = "tcpbulk"
	sysSendRecv = "sendrecv"
	sysRead     = "read"
	sysHybrid   = "hybrid"
	sysRedis    = "redis"
)

// The verbs transports between the stores: the tcp soft NIC over
// loopback, and shm, where a READ is the fetcher's copy out of the
// holder's memory (the holder's CPU is not involved, as with an RNIC).
const (
	transportTCP = "tcp"
	transportSHM = "shm"
)

// fetchSystem is a row system of objstore-fetch: a fetcher's protocol,
// over a verbs transport for the verbs protocols.
type fetchSystem struct {
	proto     string
	transport string // "" for the TCP baselines
}

// name is the row's system: tcp4k, tcpbulk, or PROTOCOL/TRANSPORT.
func (s fetchSystem) name() string {
	if s.transport == "" {
		return s.proto
	}
	return s.proto + "/" + s.transport
}

// holder is the transport of the holder it fetches from: the baselines
// use the tcp holder's plain TCP listener.
func (s fetchSystem) holder() string {
	if s.transport == "" {
		return transportTCP
	}
	return s.transport
}

// fetchSystems are objstore-fetch's store systems, in row order.
var fetchSystems = func() []fetchSystem {
	out := []fetchSystem{{proto: sysTCP4K}, {proto: sysTCPBulk}}
	for _, t := range []string{transportTCP, transportSHM} {
		for _, p := range []string{sysSendRecv, sysRead, sysHybrid} {
			out = append(out, fetchSystem{proto: p, transport: t})
		}
	}
	return out
}()

// keeps reports whether --only selects s: by its name, its protocol
// (every transport) or its transport (every verbs protocol over it).
func keeps(env *bench.Env, s fetchSystem) bool {
	return env.Keeps(s.proto, s.transport) || (s.transport != "" && env.Keeps(s.transport, ""))
}

// keepForever is the fetchers' --keep-resident: more than a run ever
// frees, so the store never gives pages back (objstore.Config.KeepResident
// counts the bytes freed since its last give-back; any smaller value
// would make every so many fetches pay the page faults of fresh memory).
const keepForever = 1 << 50

// shmSeq makes the shm device names of a process's runs distinct.
var shmSeq atomic.Int64

// fetchSizes are objstore-fetch's sizes; quickFetchSizes a quick run's.
var (
	fetchSizes      = []int{1 << 10, 4 << 10, 16 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}
	quickFetchSizes = []int{1 << 10, 32 << 10, 1 << 20, 4 << 20}
)

// fetchPlan is how many objects a run moves.
type fetchPlan struct {
	sizes   []int
	fetches int   // timed fetches per point and round, at most
	moved   int64 // bytes a point's timed fetches move per round, at most
	budget  int64 // bytes of distinct objects the holder keeps per size
	warmup  int
	rounds  int
}

func planFor(quick bool) fetchPlan {
	if quick {
		return fetchPlan{sizes: quickFetchSizes, fetches: 20, moved: 64 << 20, budget: 32 << 20, warmup: 10, rounds: 1}
	}
	return fetchPlan{sizes: fetchSizes, fetches: 1000, moved: 2 << 30, budget: 1 << 30, warmup: 10, rounds: fullRounds}
}

// count is how many timed fetches of size a point makes per round: the
// plan's fetches, or as many as its moved bytes allow (at least 20).
func (p fetchPlan) count(size int) int {
	return max(min(20, p.fetches), min(p.fetches, int(p.moved/int64(size))))
}

// poolSize is how many distinct objects of size the holder keeps: one
// per fetch, or as many as the byte budget allows (at least one).
func (p fetchPlan) poolSize(size int) int {
	return max(1, min(p.count(size), int(p.budget/int64(size))))
}

var fetchColumns = []bench.Column{
	{Name: "system"}, {Name: "size", Unit: "B"}, {Name: "objects"}, {Name: "fetches"},
	{Name: "mean", Unit: "µs"}, {Name: "p50", Unit: "µs"}, {Name: "GB/s"},
	{Name: "copied", Unit: "B/object"}, {Name: "cpu", Unit: "µs/object"}, {Name: "spread", Unit: "%"},
}

// fetchSample is one round of one system at one size.
type fetchSample struct {
	mean, p50, gbps, copied, cpu float64
	fetches                      int
}

// fetchRun collects a run's samples.
type fetchRun struct {
	plan    fetchPlan
	samples map[string]map[int][]fetchSample
	pools   map[int]int
	order   []string
	notes   []string
}

func (u *fetchRun) add(sys string, size int, s fetchSample) {
	if u.samples[sys] == nil {
		u.samples[sys] = map[int][]fetchSample{}
		u.order = append(u.order, sys)
	}
	u.samples[sys][size] = append(u.samples[sys][size], s)
}

func runFetch(ctx context.Context, env *bench.Env) (*bench.Result, error) {
	plan := planFor(env.Quick)
	u := &fetchRun{plan: plan, samples: map[string]map[int][]fetchSample{}, pools: map[int]int{}}
	var systems []fetchSystem
	var names []string
	for _, s := range fetchSystems {
		names = append(names, s.name())
		if keeps(env, s) {
			systems = append(systems, s)
		}
	}
	withRedis := env.Keeps(sysRedis, "")
	if len(systems) == 0 && !withRedis {
		return nil, fmt.Errorf("%w: --only %s names none of objstore-fetch's systems (%s, %s; a protocol or a transport alone selects all its rows)",
			bench.ErrNoSystem, strings.Join(env.Only, ","), strings.Join(names, ", "), sysRedis)
	}
	r := &bench.Result{Name: "objstore-fetch", Title: "Cross-store fetch: Plasma's 4 KB socket path, bulk TCP, SEND/RECV, READ, the hybrid (over tcp and shm) and Redis GET",
		Columns: fetchColumns, Meta: bench.Meta{Transport: "tcp and shm (verbs devices between the stores), loopback TCP (baselines, Redis)"}}
	if len(systems) > 0 {
		if err := u.stores(ctx, env, systems); err != nil {
			if !errors.Is(err, bench.ErrNoCommand) {
				return nil, err
			}
			u.notes = append(u.notes, errNoCommandNote(err))
		}
	}
	if withRedis {
		if err := u.redis(ctx); err != nil {
			if !errors.Is(err, errNoRedis) {
				return nil, err
			}
			u.notes = append(u.notes, fmt.Sprintf("redis: no rows: %v.", err))
		}
	}
	u.report(r)
	return r, nil
}

// holderStore is a holder process and its client.
type holderStore struct {
	*store
	c *objstore.Client
}

// stores runs the store rows: a holder per transport the systems use
// (the tcp one also serves the plain-TCP baselines) and one fetcher per
// system, all in their own processes for the whole run.
func (u *fetchRun) stores(ctx context.Context, env *bench.Env, systems []fetchSystem) error {
	maxSize := u.plan.sizes[len(u.plan.sizes)-1]
	holderMem := u.plan.budget + int64(maxSize) + 64<<20
	fetcherMem := strconv.Itoa(4*maxSize + 64<<20)
	run := fmt.Sprintf("objexp-%d-%d", os.Getpid(), shmSeq.Add(1))
	holders := map[string]*holderStore{}
	var transports []string // the holders', in order
	for _, sys := range systems {
		t := sys.holder()
		if holders[t] != nil {
			continue
		}
		args := []string{"--mem", strconv.FormatInt(holderMem, 10), "--listen", "127.0.0.1:0", "--stats", "127.0.0.1:0"}
		if t == transportSHM {
			args = append(args, "--device", "shm://"+run+"-holder")
		} else {
			args = append(args, "--tcp-listen", "127.0.0.1:0")
		}
		h, err := startStore(ctx, env, args...)
		if err != nil {
			return err
		}
		defer h.Stop()
		c, err := objstore.Connect(ctx, h.Socket)
		if err != nil {
			return h.Explain(err)
		}
		defer c.Close()
		holders[t] = &holderStore{h, c}
		transports = append(transports, t)
	}
	// The hybrid's threshold per transport, measured now by objstore
	// tune against the transport's holder.
	thresholds := map[string]int{}
	for _, sys := range systems {
		if sys.proto != sysHybrid || thresholds[sys.transport] != 0 {
			continue
		}
		dev := "tcp://127.0.0.1:0"
		if sys.transport == transportSHM {
			dev = "shm://" + run + "-tune"
		}
		th, out, err := tuneThreshold(ctx, env, holders[sys.holder()], dev)
		if err != nil {
			return err
		}
		thresholds[sys.transport] = th
		u.notes = append(u.notes, fmt.Sprintf("hybrid/%s's threshold: %d B, measured in this run by `rdmakit objstore tune --device %s` against the %s holder (p50 SEND/RECV / READ per size: %s).",
			sys.transport, th, strings.SplitN(dev, ":", 2)[0]+"://…", sys.transport, tuneSummary(out)))
	}
	fetchers := map[string]*store{}
	clients := map[string]*objstore.Client{}
	for _, sys := range systems {
		h := holders[sys.holder()]
		peer := h.Verbs
		if sys.transport == "" {
			peer = h.TCP
		}
		// The fetched copy is deleted after each fetch: its pages stay
		// resident for the next one (--keep-resident), as in a store
		// that recycles its memory, so no row pays page faults.
		args := []string{"--mem", fetcherMem, "--keep-resident", strconv.FormatInt(keepForever, 10), "--peers", peer, "--protocol", sys.proto, "--stats", "127.0.0.1:0"}
		if sys.transport == transportSHM {
			args = append(args, "--device", "shm://"+run+"-"+sys.proto)
		}
		if th := thresholds[sys.transport]; sys.proto == sysHybrid && th > 0 {
			args = append(args, "--threshold", strconv.Itoa(th))
		}
		f, err := startStore(ctx, env, args...)
		if err != nil {
			return err
		}
		defer f.Stop()
		c, err := objstore.Connect(ctx, f.Socket)
		if err != nil {
			return f.Explain(err)
		}
		defer c.Close()
		fetchers[sys.name()], clients[sys.name()] = f, c
	}
	steps := len(u.plan.sizes) * len(systems) * u.plan.rounds
	bar := env.Progress(steps, time.Duration(steps)*time.Second, "objstore-fetch")
	defer bar.Finish()
	lat := stats.NewLatencies(u.plan.fetches)
	for _, size := range u.plan.sizes {
		pools := map[string][]object.ID{}
		sums := map[object.ID]uint32{}
		for _, t := range transports {
			h := holders[t]
			pool, s, err := fillPool(ctx, h.c, size, u.plan.poolSize(size))
			if err != nil {
				return h.Explain(fmt.Errorf("objexp: fill the %s holder with %s objects: %w", t, sizeLabel(size), err))
			}
			pools[t] = pool
			maps.Copy(sums, s)
			u.pools[size] = len(pool)
		}
		for range u.plan.rounds {
			for _, sys := range systems {
				name, h := sys.name(), holders[sys.holder()]
				bar.Describe(fmt.Sprintf("objstore-fetch %s %s", name, sizeLabel(size)))
				s, err := u.measureStore(ctx, h.store, fetchers[name], clients[name], pools[sys.holder()], sums, size, lat)
				if err != nil {
					return fetchers[name].Explain(h.Explain(fmt.Errorf("objexp: %s, %s: %w", name, sizeLabel(size), err)))
				}
				u.add(name, size, s)
				bar.Add(1)
			}
		}
		for _, t := range transports {
			if err := holders[t].c.Delete(ctx, pools[t]...); err != nil {
				return fmt.Errorf("objexp: empty the %s holder: %w", t, err)
			}
		}
	}
	return nil
}

// fillPool creates n sealed objects of size bytes at the holder, each
// with different bytes, and returns their IDs and CRCs.
func fillPool(ctx context.Context, c *objstore.Client, size, n int) ([]object.ID, map[object.ID]uint32, error) {
	ids := make([]object.ID, n)
	sums := make(map[object.ID]uint32, n)
	for i := range ids {
		id := object.NewID()
		dst, err := c.Create(ctx, id, size, nil)
		if err != nil {
			return nil, nil, err
		}
		fill(dst, id)
		if err := c.Seal(ctx, id); err != nil {
			return nil, nil, err
		}
		if err := c.Release(ctx, id); err != nil {
			return nil, nil, err
		}
		ids[i], sums[id] = id, crc32.ChecksumIEEE(dst)
	}
	return ids, sums, nil
}

// fill writes bytes derived from id into b: an xorshift stream, 8 bytes
// at a time.
func fill(b []byte, id object.ID) {
	x := binary.LittleEndian.Uint64(id[:8]) | 1
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(w[:], x)
		copy(b[i:], w[:])
	}
}

// measureStore runs one round of one protocol at one size: warm-up
// fetches whose copies are checked against the holder's CRCs, then the
// timed fetches in random order, the fetched copy deleted after each.
func (u *fetchRun) measureStore(ctx context.Context, holder, fetcher *store, c *objstore.Client, pool []object.ID,
	sums map[object.ID]uint32, size int, lat *stats.Latencies) (fetchSample, error) {
	rng := rand.New(rand.NewPCG(uint64(size), uint64(len(pool))))
	for range u.plan.warmup {
		id := pool[rng.IntN(len(pool))]
		if _, err := fetchOne(ctx, c, id); err != nil {
			return fetchSample{}, err
		}
		if err := checkCopy(ctx, c, id, size, sums[id]); err != nil {
			return fetchSample{}, err
		}
		if err := c.Delete(ctx, id); err != nil {
			return fetchSample{}, err
		}
	}
	order := make([]object.ID, u.plan.count(size))
	perm := rng.Perm(len(pool))
	for i := range order {
		order[i] = pool[perm[i%len(perm)]]
	}
	before, err := snapshot(ctx, holder, fetcher)
	if err != nil {
		return fetchSample{}, err
	}
	lat.Reset()
	var total time.Duration
	for _, id := range order {
		d, err := fetchOne(ctx, c, id)
		if err != nil {
			return fetchSample{}, err
		}
		lat.Record(d)
		total += d
		if err := c.Delete(ctx, id); err != nil {
			return fetchSample{}, err
		}
	}
	after, err := snapshot(ctx, holder, fetcher)
	if err != nil {
		return fetchSample{}, err
	}
	n := float64(len(order))
	s := lat.Summary()
	return fetchSample{
		mean: us(s.Avg), p50: us(s.P50), fetches: len(order),
		gbps:   float64(size) * n / total.Seconds() / 1e9,
		copied: float64(after.copied-before.copied) / n,
		cpu:    us(after.cpu-before.cpu) / n,
	}, nil
}

// fetchOne fetches id into the fetcher's store and times it.
func fetchOne(ctx context.Context, c *objstore.Client, id object.ID) (time.Duration, error) {
	t0 := time.Now()
	errs, err := c.Fetch(ctx, []object.ID{id})
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	return d, errs[0]
}

// checkCopy compares the fetched copy of id with the holder's CRC.
func checkCopy(ctx context.Context, c *objstore.Client, id object.ID, size int, want uint32) error {
	bufs, err := c.Get(ctx, []object.ID{id}, 0)
	if err != nil {
		return err
	}
	if bufs[0] == nil {
		return fmt.Errorf("fetched object %s is not in the fetcher's store", id)
	}
	defer c.Release(ctx, id)
	if len(bufs[0].Data) != size {
		return fmt.Errorf("fetched object %s has %d bytes, want %d", id, len(bufs[0].Data), size)
	}
	if got := crc32.ChecksumIEEE(bufs[0].Data); got != want {
		return fmt.Errorf("fetched object %s: CRC %#x, the holder's is %#x", id, got, want)
	}
	return nil
}

// counts are both stores' CPU time and user-space copies at one moment.
type counts struct {
	cpu    time.Duration
	copied int64
}

func snapshot(ctx context.Context, stores ...*store) (counts, error) {
	var c counts
	for _, s := range stores {
		cpu, err := s.CPU()
		if err != nil {
			return c, err
		}
		st, err := node.ReadStats(ctx, s.Stats)
		if err != nil {
			return c, err
		}
		c.cpu += cpu
		c.copied += st.Transfer.CopiedBytes
	}
	return c, nil
}

// report adds the rows and notes.
func (u *fetchRun) report(r *bench.Result) {
	for _, sys := range u.order {
		for _, size := range u.plan.sizes {
			ss := u.samples[sys][size]
			if len(ss) == 0 {
				continue
			}
			var mean, p50, gbps, copied, cpu []float64
			fetches := 0
			for _, s := range ss {
				mean, p50, gbps = append(mean, s.mean), append(p50, s.p50), append(gbps, s.gbps)
				copied, cpu = append(copied, s.copied), append(cpu, s.cpu)
				fetches += s.fetches
			}
			r.AddRow(sys, size, u.pools[size], fetches, median(mean), median(p50), median(gbps),
				num(median(copied)), median(cpu), spread(p50))
		}
	}
	r.Notes = append(r.Notes, u.notes...)
	for _, t := range []string{transportSHM, transportTCP} {
		hybrid, sendrecv := sysHybrid+"/"+t, sysSendRecv+"/"+t
		if u.samples[hybrid] == nil {
			continue
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%s ÷ tcp4k GB/s at 4 MiB: %s (target ≥ 7×); %s ÷ Redis GB/s at 4 MiB: %s (target ≥ 2×); "+
			"%s ÷ %s p50 at 1 KiB: %s (target ≥ 1×: the hybrid no slower than SEND/RECV only) — same run.",
			hybrid, times(ratio(u.stat(hybrid, 4<<20, gbpsOf), u.stat(sysTCP4K, 4<<20, gbpsOf))),
			hybrid, times(ratio(u.stat(hybrid, 4<<20, gbpsOf), u.stat(sysRedis, 4<<20, gbpsOf))),
			sendrecv, hybrid, times(ratio(u.stat(sendrecv, 1<<10, p50Of), u.stat(hybrid, 1<<10, p50Of)))))
	}
	r.Notes = append(r.Notes,
		fmt.Sprintf("Stores, each `rdmakit objstore serve` in its own process, all running for the whole experiment: a holder per verbs transport — "+
			"tcp (the tcp soft NIC over loopback, objects registered per READ; it also serves the plain-TCP baselines) and shm (`--device shm://…`: "+
			"memory shared by memfd, a READ is the fetcher's copy out of the holder's mapping, the holder's CPU and kernel not involved, as with an RNIC; "+
			"the store's arena is one pre-registered region, no registration per READ) — and one fetcher per system (PROTOCOL/TRANSPORT), "+
			"whose freed memory stays resident (`--keep-resident` 1 PiB: never given back, the arena's pages faulted in once). A client in the experiment's process creates a pool of distinct objects "+
			"of each size at each holder (objects: one per timed fetch, or as many as %d MiB hold), then, per system, has the fetcher's client fetch %d objects "+
			"(or as many as move %d MiB; fetches counts all rounds) picked from its holder's pool in random order, after %d warm-up fetches whose copies are "+
			"checked by CRC-32, deleting the fetched copy after each fetch (not timed), so every fetch moves the object across.",
			u.plan.budget>>20, u.plan.fetches, u.plan.moved>>20, u.plan.warmup),
		"mean and p50 are per Fetch call (one ID, the client's round trip to its store included); GB/s is size / mean latency. "+
			"copied is the bytes both stores copied in user space per object (the transfer layer's counters, /stats): SEND/RECV copies object → slot → object, "+
			"READ and TCP copy nothing in user space (the kernel or the transport's NIC does: over shm a READ is one memcpy by the fetcher's NIC). cpu is both store processes' user+system CPU time "+
			"(/proc/PID/stat, 10 ms ticks) over the timed fetches, deletes included, per object; for Redis it is redis-server's alone (the client is the experiment's process).",
		fmt.Sprintf("Redis: redis-server started by the experiment (no persistence), values SET first, one go-redis client GETting them in random order, "+
			"the same pools and counts. %d round(s); every figure is the median of the rounds, spread is (max−min)/median of p50.", u.plan.rounds))
	r.Plots = []bench.Plot{
		{Title: "fetch throughput against object size", X: "size", Y: "GB/s", Series: []string{"system"}, LogX: true, LogY: true},
		{Title: "fetch latency p50 against object size", X: "size", Y: "p50", Series: []string{"system"}, LogX: true, LogY: true},
	}
}

func gbpsOf(s fetchSample) float64 { return s.gbps }
func p50Of(s fetchSample) float64  { return s.p50 }

// stat is the median over the rounds of f of sys at size (NaN if not
// measured).
func (u *fetchRun) stat(sys string, size int, f func(fetchSample) float64) float64 {
	var xs []float64
	for _, s := range u.samples[sys][size] {
		xs = append(xs, f(s))
	}
	return median(xs)
}
