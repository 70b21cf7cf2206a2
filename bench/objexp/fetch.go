package objexp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"strings"
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
		Description: "cross-store fetch of 1 KiB to 16 MiB objects between two store processes over tcp (the Plasma thesis' §4): " +
			"TCP4K, TCPBulk, SendRecv, Read, Hybrid and Redis GET — latency, GB/s, bytes copied and CPU per object",
		Run: runFetch,
	})
}

// The systems of objstore-fetch: the fetcher's protocols (the names
// `rdmakit objstore serve --protocol` takes) and Redis.
const (
	sysTCP4K    = "tcp4k"
	sysTCPBulk  = "tcpbulk"
	sysSendRecv = "sendrecv"
	sysRead     = "read"
	sysHybrid   = "hybrid"
	sysRedis    = "redis"
)

var fetchProtocols = []string{sysTCP4K, sysTCPBulk, sysSendRecv, sysRead, sysHybrid}

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
	var protos []string
	for _, p := range fetchProtocols {
		if env.Keeps(p, "") {
			protos = append(protos, p)
		}
	}
	withRedis := env.Keeps(sysRedis, "")
	if len(protos) == 0 && !withRedis {
		return nil, fmt.Errorf("%w: --only %s names none of objstore-fetch's systems (%s, %s)",
			bench.ErrNoSystem, strings.Join(env.Only, ","), strings.Join(fetchProtocols, ", "), sysRedis)
	}
	r := &bench.Result{Name: "objstore-fetch", Title: "Cross-store fetch: Plasma's 4 KB socket path, bulk TCP, SEND/RECV, READ, the hybrid and Redis GET",
		Columns: fetchColumns, Meta: bench.Meta{Transport: "tcp (verbs tcp device between stores), loopback TCP (baselines, Redis)"}}
	if len(protos) > 0 {
		if err := u.stores(ctx, env, protos); err != nil {
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

// stores runs the store rows: one holder, one fetcher per protocol, all
// in their own processes for the whole run.
func (u *fetchRun) stores(ctx context.Context, env *bench.Env, protos []string) error {
	maxSize := u.plan.sizes[len(u.plan.sizes)-1]
	holderMem := u.plan.budget + int64(maxSize) + 64<<20
	holder, err := startStore(ctx, env, "--mem", strconv.FormatInt(holderMem, 10), "--listen", "127.0.0.1:0",
		"--tcp-listen", "127.0.0.1:0", "--stats", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer holder.stop()
	fetchers := map[string]*store{}
	for _, p := range protos {
		peer := holder.Verbs
		if p == sysTCP4K || p == sysTCPBulk {
			peer = holder.TCP
		}
		f, err := startStore(ctx, env, "--mem", strconv.Itoa(4*maxSize+64<<20), "--peers", peer, "--protocol", p, "--stats", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer f.stop()
		fetchers[p] = f
	}
	hc, err := objstore.Connect(ctx, holder.Socket)
	if err != nil {
		return holder.explain(err)
	}
	defer hc.Close()
	clients := map[string]*objstore.Client{}
	for p, f := range fetchers {
		c, err := objstore.Connect(ctx, f.Socket)
		if err != nil {
			return f.explain(err)
		}
		defer c.Close()
		clients[p] = c
	}
	steps := len(u.plan.sizes) * len(protos) * u.plan.rounds
	bar := env.Progress(steps, time.Duration(steps)*time.Second, "objstore-fetch")
	defer bar.Finish()
	lat := stats.NewLatencies(u.plan.fetches)
	for _, size := range u.plan.sizes {
		pool, sums, err := fillPool(ctx, hc, size, u.plan.poolSize(size))
		if err != nil {
			return holder.explain(fmt.Errorf("objexp: fill the holder with %s objects: %w", sizeLabel(size), err))
		}
		u.pools[size] = len(pool)
		for range u.plan.rounds {
			for _, p := range protos {
				bar.Describe(fmt.Sprintf("objstore-fetch %s %s", p, sizeLabel(size)))
				s, err := u.measureStore(ctx, holder, fetchers[p], clients[p], pool, sums, size, lat)
				if err != nil {
					return fetchers[p].explain(holder.explain(fmt.Errorf("objexp: %s, %s: %w", p, sizeLabel(size), err)))
				}
				u.add(p, size, s)
				bar.Add(1)
			}
		}
		if err := hc.Delete(ctx, pool...); err != nil {
			return fmt.Errorf("objexp: empty the holder: %w", err)
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
		cpu, err := s.cpu()
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
	r.Notes = append(r.Notes,
		fmt.Sprintf("Hybrid/TCP4K GB/s at 4 MiB: %s (target ≥ 7×); Hybrid/Redis GB/s at 4 MiB: %s (target ≥ 2×); "+
			"SendRecv/Hybrid p50 at 1 KiB: %s (target ≥ 1×: the hybrid no slower than SEND/RECV only) — same run.",
			times(ratio(u.stat(sysHybrid, 4<<20, gbpsOf), u.stat(sysTCP4K, 4<<20, gbpsOf))),
			times(ratio(u.stat(sysHybrid, 4<<20, gbpsOf), u.stat(sysRedis, 4<<20, gbpsOf))),
			times(ratio(u.stat(sysSendRecv, 1<<10, p50Of), u.stat(sysHybrid, 1<<10, p50Of)))),
		fmt.Sprintf("Two stores, each `rdmakit objstore serve` in its own process: a holder (verbs tcp device and plain TCP listener) and one fetcher "+
			"per protocol, all running for the whole experiment. A client in the experiment's process creates a pool of distinct objects of each size "+
			"at the holder (objects: one per timed fetch, or as many as %d MiB hold), then, per protocol, has the fetcher's client fetch %d objects "+
			"(or as many as move %d MiB; fetches counts all rounds) picked from the pool in random order, after %d warm-up fetches whose copies are "+
			"checked by CRC-32, deleting the fetched copy after each fetch (not timed), so every fetch moves the object across.",
			u.plan.budget>>20, u.plan.fetches, u.plan.moved>>20, u.plan.warmup),
		"mean and p50 are per Fetch call (one ID, the client's round trip to its store included); GB/s is size / mean latency. "+
			"copied is the bytes both stores copied in user space per object (the transfer layer's counters, /stats): SEND/RECV copies object → slot → object, "+
			"READ and TCP copy nothing in user space (the kernel or the transport's NIC does). cpu is both store processes' user+system CPU time "+
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
