package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magiconair/properties"
	"github.com/pingcap/go-ycsb/pkg/measurement"
	"github.com/pingcap/go-ycsb/pkg/prop"
	_ "github.com/pingcap/go-ycsb/pkg/workload" // registers "core"
	"github.com/pingcap/go-ycsb/pkg/ycsb"

	"github.com/rdmakit/rdmakit/kv"
)

// YCSB configures a run of one YCSB core workload.
type YCSB struct {
	// Workload is the letter: a (50% reads, 50% updates), b (95/5), c
	// (reads only), d (95% reads of the latest, 5% inserts) or f (50%
	// reads, 50% read-modify-writes).
	Workload string
	// Distribution is "uniform" or "zipfian" (go-ycsb's scrambled zipfian,
	// constant 0.99). Workload d always reads the latest.
	Distribution string
	// Records is the number of keys loaded first.
	Records int64
	// ValueSize is each value's bytes (one field).
	ValueSize int
	// Threads is the number of goroutines issuing operations; each uses
	// DBs[i % len(DBs)].
	Threads int
	// Duration bounds the run (default 2 s).
	Duration time.Duration
	// OrderedKeys names record N "user<N>" (go-ycsb's insertorder
	// ordered) instead of after a hash of N, so that BlockDB can take N
	// for a block id. The keys chosen are the same either way.
	OrderedKeys bool
}

// mix returns the go-ycsb proportions of a workload letter.
func mix(w string) (map[string]string, error) {
	base := map[string]string{prop.ReadProportion: "0", prop.UpdateProportion: "0", prop.InsertProportion: "0",
		prop.ScanProportion: "0", prop.ReadModifyWriteProportion: "0"}
	switch strings.ToLower(w) {
	case "a":
		base[prop.ReadProportion], base[prop.UpdateProportion] = "0.5", "0.5"
	case "b":
		base[prop.ReadProportion], base[prop.UpdateProportion] = "0.95", "0.05"
	case "c":
		base[prop.ReadProportion] = "1"
	case "d":
		base[prop.ReadProportion], base[prop.InsertProportion] = "0.95", "0.05"
		base[prop.RequestDistribution] = "latest"
	case "f":
		base[prop.ReadProportion], base[prop.ReadModifyWriteProportion] = "0.5", "0.5"
	default:
		return nil, fmt.Errorf("workload: YCSB workload %q (want a, b, c, d or f)", w)
	}
	return base, nil
}

var measureOnce sync.Once

// newCore builds go-ycsb's core workload for y.
func (y *YCSB) newCore() (ycsb.Workload, error) {
	m, err := mix(y.Workload)
	if err != nil {
		return nil, err
	}
	if y.Distribution == "" {
		y.Distribution = "uniform"
	}
	if y.Distribution != "uniform" && y.Distribution != "zipfian" {
		return nil, fmt.Errorf("workload: distribution %q (want uniform or zipfian)", y.Distribution)
	}
	if y.Records <= 0 || y.ValueSize <= 0 || y.ValueSize > kv.MaxValue {
		return nil, fmt.Errorf("workload: %d records of %d bytes", y.Records, y.ValueSize)
	}
	p := properties.NewProperties()
	set := func(k, v string) { _, _, _ = p.Set(k, v) }
	set(prop.RecordCount, fmt.Sprint(y.Records))
	set(prop.OperationCount, fmt.Sprint(int64(1)<<40))
	set(prop.FieldCount, "1")
	set(prop.FieldLength, fmt.Sprint(y.ValueSize))
	set(prop.ReadAllFields, "true")
	set(prop.WriteAllFields, "true")
	set(prop.RequestDistribution, y.Distribution)
	if y.OrderedKeys {
		set(prop.InsertOrder, "ordered")
	}
	for k, v := range m {
		set(k, v)
	}
	measureOnce.Do(func() { measurement.InitMeasure(p) }) // read-modify-writes report to it
	return quietly(func() (ycsb.Workload, error) { return ycsb.GetWorkloadCreator("core").Create(p) })
}

var stdoutMu sync.Mutex

// quietly runs f with os.Stdout on /dev/null: go-ycsb's core workload
// prints its key distribution to standard output when it is created,
// which would land in the middle of a command's table.
func quietly(f func() (ycsb.Workload, error)) (ycsb.Workload, error) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return f()
	}
	defer null.Close()
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	saved := os.Stdout
	os.Stdout = null
	defer func() { os.Stdout = saved }()
	return f()
}

// DB adapts a kv.Store to go-ycsb's DB: a record is one field whose bytes
// are the value. A thread that InitThread set up reads without allocating:
// its key, value and the record Read returns are the thread's own
// buffers, reused by its next Read (go-ycsb's core workload is done with
// a record before it asks for the next). Every system a benchmark compares
// goes through this adapter, so what it costs a GET is the same for all.
type DB struct {
	Store kv.Store
}

var _ ycsb.DB = DB{}

// Close implements ycsb.DB (the store stays open: its owner closes it).
func (DB) Close() error { return nil }

// threadKey keys a thread's buffers in its context.
type threadKey struct{}

// thread is one goroutine's buffers for Read.
type thread struct {
	key    []byte
	value  []byte
	record map[string][]byte
}

// InitThread implements ycsb.DB: the thread's buffers.
func (DB) InitThread(ctx context.Context, _, _ int) context.Context {
	return context.WithValue(ctx, threadKey{}, &thread{record: make(map[string][]byte, 1)})
}

// CleanupThread implements ycsb.DB.
func (DB) CleanupThread(context.Context) {}

// Read implements ycsb.DB. With InitThread's buffers the record is valid
// until the thread's next Read.
func (d DB) Read(ctx context.Context, _ string, key string, _ []string) (map[string][]byte, error) {
	t, _ := ctx.Value(threadKey{}).(*thread)
	if t == nil {
		v, err := d.Store.Get(ctx, []byte(key), nil)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"field0": v}, nil
	}
	t.key = append(t.key[:0], key...)
	v, err := d.Store.Get(ctx, t.key, t.value[:0])
	if err != nil {
		return nil, err
	}
	t.value = v
	t.record["field0"] = v
	return t.record, nil
}

// ErrNoScan: the stores are hash tables.
var ErrNoScan = errors.New("workload: scans are not supported")

// Scan implements ycsb.DB.
func (DB) Scan(context.Context, string, string, int, []string) ([]map[string][]byte, error) {
	return nil, ErrNoScan
}

func value(values map[string][]byte) []byte {
	if v, ok := values["field0"]; ok && len(values) == 1 {
		return v
	}
	var out []byte
	for _, v := range values {
		out = append(out, v...)
	}
	return out
}

// Update implements ycsb.DB.
func (d DB) Update(ctx context.Context, _ string, key string, values map[string][]byte) error {
	return d.Store.Put(ctx, []byte(key), value(values))
}

// Insert implements ycsb.DB.
func (d DB) Insert(ctx context.Context, _ string, key string, values map[string][]byte) error {
	return d.Store.Put(ctx, []byte(key), value(values))
}

// Delete implements ycsb.DB.
func (d DB) Delete(ctx context.Context, _ string, key string) error {
	return d.Store.Delete(ctx, []byte(key))
}

// Result is a run's outcome.
type Result struct {
	Ops      int64         // operations completed
	Errors   int64         // operations that failed
	Elapsed  time.Duration // wall time of the run
	P50, P99 time.Duration // operation latency
	Mean     time.Duration
	FirstErr error
}

// Rate is operations per second.
func (r Result) Rate() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// Load inserts y.Records records through dbs (in parallel, one goroutine
// per DB) and returns the workload to Run with.
func (y *YCSB) Load(ctx context.Context, dbs []ycsb.DB) (ycsb.Workload, error) {
	wl, err := y.newCore()
	if err != nil {
		return nil, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	for i, db := range dbs {
		wg.Add(1)
		go func(i int, db ycsb.DB) {
			defer wg.Done()
			tctx := db.InitThread(ctx, i, len(dbs))
			defer db.CleanupThread(tctx)
			tctx = wl.InitThread(tctx, i, len(dbs))
			defer wl.CleanupThread(tctx)
			for next.Add(1) <= y.Records {
				if err := wl.DoInsert(tctx, db); err != nil {
					once.Do(func() { first = fmt.Errorf("workload: loading: %w", err) })
					return
				}
			}
		}(i, db)
	}
	wg.Wait()
	return wl, first
}

// Run runs the workload's operations from y.Threads goroutines for
// y.Duration and measures them.
func (y *YCSB) Run(ctx context.Context, wl ycsb.Workload, dbs []ycsb.DB) (Result, error) {
	if y.Threads <= 0 {
		y.Threads = len(dbs)
	}
	if y.Duration <= 0 {
		y.Duration = 2 * time.Second
	}
	var ops, errs atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(y.Duration)
	for i := 0; i < y.Threads; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			db := dbs[i%len(dbs)]
			tctx := db.InitThread(ctx, i, y.Threads) // as go-ycsb's own client: the DB's, then the workload's
			defer db.CleanupThread(tctx)
			tctx = wl.InitThread(tctx, i, y.Threads)
			defer wl.CleanupThread(tctx)
			local := make([]time.Duration, 0, 1<<14)
			for n := 0; ; n++ {
				if n&15 == 0 && (time.Now().After(deadline) || ctx.Err() != nil) {
					break
				}
				t0 := time.Now()
				err := wl.DoTransaction(tctx, db)
				d := time.Since(t0)
				if err != nil && !errors.Is(err, kv.ErrNotFound) {
					errs.Add(1)
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					continue
				}
				ops.Add(1)
				if len(local) < cap(local) {
					local = append(local, d)
				} else if n%8 == 0 { // keep a sample, bounded
					local[n%len(local)] = d
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	r := Result{Ops: ops.Load(), Errors: errs.Load(), Elapsed: time.Since(start), FirstErr: first}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50, r.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		r.Mean = sum / time.Duration(len(lat))
	}
	if r.Ops == 0 && first != nil {
		return r, fmt.Errorf("workload: every operation failed: %w", first)
	}
	return r, nil
}
