package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/go-ycsb/pkg/generator"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

func init() {
	Register(Experiment{
		Name: "smart-conflict",
		Description: "Smart's conflict avoidance (Fig. 14): CAS increments of a slot array at zipf 0.99, 100% updates — " +
			"throughput, retries per operation and their distribution, naive retries vs each technique",
		Run: runSmartConflict,
	})
}

var conflictColumns = []Column{
	{Name: "slots"}, {Name: "technique"}, {Name: "rate", Unit: "Mops"}, {Name: "retries_per_op"},
	{Name: "no_retry", Unit: "%"}, {Name: "retry_1", Unit: "%"}, {Name: "retry_2_4", Unit: "%"}, {Name: "retry_5_plus", Unit: "%"},
	{Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"}, {Name: "cmax", Unit: "µs"}, {Name: "n_max"},
	{Name: "vs_naive", Unit: "×"},
}

// conflictTechnique is one configuration of conflict avoidance.
type conflictTechnique struct {
	name    string
	backoff bool
	cfg     smart.BackoffConfig
}

// conflictCost is the memory node's cost model: one pipeline serving a
// request per microsecond, so wasted retries take capacity from useful
// work, as they take IOPS from an RNIC.
// conflictCost is the node's cost model: 1 µs per request, executed
// asynchronously as a NIC does, so CASes queue at the hot slot.
var conflictCost = nic.CostModel{Service: time.Microsecond}

func runSmartConflict(ctx context.Context, env *Env) (*Result, error) {
	point := env.PointDuration(time.Second, 150*time.Millisecond)
	r := &Result{
		Name:    "smart-conflict",
		Title:   "conflict avoidance on a CAS-contended slot array (zipf 0.99, 100% updates)",
		Columns: conflictColumns,
		Plots: []Plot{{Title: "retries per operation against slot-array size", X: "slots", Y: "retries_per_op",
			Series: []string{"technique"}, LogX: true}},
	}
	c0 := 4 * conflictCost.Service // about one round trip through the node's pipeline
	techniques := []conflictTechnique{
		{name: "naive retry"},
		{name: "backoff (static limit)", backoff: true, cfg: smart.BackoffConfig{C0: c0}},
		{name: "backoff + dynamic limit", backoff: true, cfg: smart.BackoffConfig{C0: c0, Dynamic: true}},
		{name: "backoff + dynamic limit + task throttling", backoff: true, cfg: smart.BackoffConfig{C0: c0, Dynamic: true, Throttle: true}},
	}
	sizes := []int{4096, 64, 8, 1}
	bar := env.Progress(len(sizes)*len(techniques), time.Duration(len(sizes)*len(techniques))*point, "smart-conflict")
	defer bar.Finish()
	for _, slots := range sizes {
		var naive float64
		for _, tech := range techniques {
			m, err := runConflict(ctx, slots, tech, point)
			if err != nil {
				return nil, fmt.Errorf("smart-conflict %d slots, %s: %w", slots, tech.name, err)
			}
			var vs any
			if tech.name == "naive retry" {
				naive = m.rate
			} else if naive > 0 {
				vs = m.rate / naive
			}
			pct := func(n uint64) float64 { return 100 * float64(n) / float64(max(m.ops, 1)) }
			r.AddRow(slots, tech.name, m.rate, m.retriesPerOp, pct(m.hist[0]), pct(m.hist[1]), pct(m.hist[2]), pct(m.hist[3]),
				us(m.p50), us(m.p99), us(m.cmax), m.nmax, vs)
			bar.Add(1)
		}
	}
	r.Meta.Transport = fmt.Sprintf("loop, cost model on (%v per request at the node)", conflictCost.Service)
	r.Notes = append(r.Notes,
		fmt.Sprintf("The client and the memory node are on a loop fabric; the node's nic runs the cost model (nic.CostModel: each request occupies its one pipeline for %v — a node of at most 1/%v requests per second, so wasted CAS retries eat the capacity useful work needs, as RNIC IOPS do, and queueing at the node opens the window between a READ and its CAS); 2 workers × 16 tasks (smart runtime), each task looping: pick a slot (scrambled zipfian 0.99, go-ycsb), READ it, CAS it to value+1; a failed CAS retries with the value it returned. 1 slot is the most contended point.", conflictCost.Service, conflictCost.Service),
		"naive retry: CAS again at once. backoff: wait a random time up to min(C_max, C0·2^k) before the k-th retry (C0 = 4 service times ≈ one round trip through the node); static keeps C_max at 1024·C0, dynamic doubles/halves it when the retry rate (the share of CAS attempts that failed, over at least 32 attempts a millisecond) is above 0.5 / below 0.1; task throttling lowers n_max (tasks a worker runs at once) once C_max is at a bound.",
		"retries_per_op: failed CASes per completed increment; the retry columns give the share of increments by how many retries they needed; p50/p99 are per increment (READ + CAS + retries); cmax and n_max are worker 0's at the end; vs_naive is throughput over the naive loop's at the same size.",
		fmt.Sprintf("Each point ran %v.", point),
	)
	return r, nil
}

type conflictResult struct {
	rate, retriesPerOp float64
	ops                uint64
	hist               [4]uint64
	p50, p99, cmax     time.Duration
	nmax               int
}

var conflictSeq atomic.Int64

func runConflict(ctx context.Context, slots int, tech conflictTechnique, point time.Duration) (conflictResult, error) {
	var res conflictResult
	fabric := fmt.Sprintf("conflict-%d", conflictSeq.Add(1))
	node, err := verbs.Open("loop://" + fabric + "/node")
	if err != nil {
		return res, err
	}
	defer node.Close()
	client, err := verbs.Open("loop://" + fabric + "/client")
	if err != nil {
		return res, err
	}
	defer client.Close()
	if err := loop.Get(fabric).SetCost("node", conflictCost); err != nil {
		return res, err
	}
	npd, _ := node.AllocPD()
	ncq, _ := node.CreateCQ(1024)
	region, err := npd.AllocMR(slots*8, verbs.AccessAll)
	if err != nil {
		return res, err
	}
	cpd, _ := client.AllocPD()
	buf, _ := cpd.AllocMR(64*64, verbs.AccessAll)
	connect := func(ctx context.Context, cq verbs.CQ) (verbs.QP, error) {
		q, err := cpd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1024}})
		if err != nil {
			return nil, err
		}
		sq, err := npd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: ncq, RecvCQ: ncq})
		if err != nil {
			return nil, err
		}
		if err := verbs.ConnectRC(q, verbs.AccessAll, node.Address(), sq.QPN()); err != nil {
			return nil, err
		}
		return q, verbs.ConnectRC(sq, verbs.AccessAll, client.Address(), q.QPN())
	}
	const workers, tasks = 2, 16
	bcfg := tech.cfg
	bcfg.Tasks = tasks
	rt, err := smart.New(ctx, smart.Config{Device: client, PD: cpd, Nodes: []smart.ConnectFunc{connect}, Workers: workers,
		Backoff: bcfg, Poll: verbs.PollAdaptive})
	if err != nil {
		return res, err
	}
	defer rt.Close()

	var mu sync.Mutex
	lat := make([]time.Duration, 0, 1<<16)
	var ops, retries atomic.Uint64
	var hist [4]atomic.Uint64
	deadline := time.Now().Add(point)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for wi, w := range rt.Workers() {
		for k := 0; k < tasks; k++ {
			wg.Add(1)
			id := wi*tasks + k
			go func(w *smart.Worker) {
				defer wg.Done()
				gen := generator.NewScrambledZipfian(0, int64(slots-1), generator.ZipfianConstant)
				rng := rand.New(rand.NewSource(int64(id) + 1))
				local := make([]time.Duration, 0, 4096)
				err := w.Go(ctx, func(t *smart.Task) error {
					sge := verbs.SGE{Addr: buf.Addr() + uint64(id*64), Length: 8, LKey: buf.LKey()}
					word := buf.Bytes()[id*64:]
					for time.Now().Before(deadline) {
						slot := region.Addr() + 8*uint64(gen.Next(rng))
						t0 := time.Now()
						if err := t.Read(0, sge, slot, region.RKey()); err != nil {
							return err
						}
						cur := binary.NativeEndian.Uint64(word)
						k := 0
						for {
							if err := t.CAS(0, sge, slot, region.RKey(), cur, cur+1); err != nil {
								return err
							}
							got := binary.NativeEndian.Uint64(word)
							if got == cur {
								break
							}
							cur = got
							k++
							if tech.backoff {
								t.Backoff(k, rng.Float64())
							}
						}
						t.Finished(k)
						local = append(local, time.Since(t0))
						ops.Add(1)
						retries.Add(uint64(k))
						switch {
						case k == 0:
							hist[0].Add(1)
						case k == 1:
							hist[1].Add(1)
						case k <= 4:
							hist[2].Add(1)
						default:
							hist[3].Add(1)
						}
					}
					return nil
				})
				if err != nil {
					errOnce.Do(func() { firstErr = err })
				}
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			}(w)
		}
	}
	start := time.Now()
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return res, firstErr
	}
	var total uint64
	for i := 0; i < slots; i++ {
		total += binary.NativeEndian.Uint64(region.Bytes()[8*i:])
	}
	if total != ops.Load() {
		return res, fmt.Errorf("the slots sum to %d after %d increments", total, ops.Load())
	}
	res.ops = ops.Load()
	res.rate = float64(res.ops) / elapsed.Seconds() / 1e6
	res.retriesPerOp = float64(retries.Load()) / float64(max(res.ops, 1))
	for i := range hist {
		res.hist[i] = hist[i].Load()
	}
	sortDurations(lat)
	if len(lat) > 0 {
		res.p50, res.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	st := rt.Workers()[0].Stats()
	res.cmax, res.nmax = st.BackoffCMax, st.Tasks
	return res, nil
}

func sortDurations(d []time.Duration) { slices.Sort(d) }
