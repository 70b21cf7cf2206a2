package workload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/go-ycsb/pkg/generator"

	"github.com/rdmakit/rdmakit/btree"
)

// TreeYCSB configures a YCSB run on an ordered index (btree.Tree): the
// core workloads A, B, C and E with fixed-size binary keys, which
// go-ycsb's string keys ("user" and 19 digits) are not. Record n's key
// is the 8 bytes of FNV-64(n), big-endian: loading inserts in scattered
// order, and byte order is the keys' numeric order. Operations choose
// records with go-ycsb's scrambled zipfian (0.99) or uniformly; E's
// scans start at a chosen record's key and ask for 1 to ScanLength keys
// (uniform, YCSB's maxscanlength), its inserts add new records after
// the loaded ones. Workload "scan" is not YCSB's: every operation is a
// scan of exactly ScanLength keys from a chosen record's key (fewer only
// where the key space ends), nothing written — fixed-length scans to
// compare indexes on.
type TreeYCSB struct {
	// Workload is the letter: a (50% reads, 50% updates), b (95/5), c
	// (reads only) or e (95% scans, 5% inserts); or "scan" (scans of
	// ScanLength keys only).
	Workload string
	// Distribution is "zipfian" (0.99) or "uniform" (default zipfian).
	Distribution string
	// Records is the keys loaded first.
	Records int64
	// ValueSize is each value's bytes (default 8).
	ValueSize int
	// ScanLength is the longest scan of workload e, every scan's length
	// in workload scan (default 100).
	ScanLength int
	// Threads is the goroutines issuing operations; thread i uses
	// Trees[i % len(Trees)].
	Threads int
	// Duration bounds the run (default 2 s).
	Duration time.Duration

	inserted atomic.Int64 // records added by e's inserts
}

// TreeKey appends record n's key to dst.
func TreeKey(dst []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(dst, fnv64(uint64(n)))
}

// fnv64 is FNV-1a over the 8 bytes of n (go-ycsb's hash of record numbers).
func fnv64(n uint64) uint64 {
	h := uint64(0xcbf29ce484222325)
	for range 8 {
		h ^= n & 0xff
		h *= 0x100000001b3
		n >>= 8
	}
	return h
}

// check fills defaults and checks the configuration.
func (y *TreeYCSB) check() error {
	if y.Distribution == "" {
		y.Distribution = "zipfian"
	}
	if y.ValueSize == 0 {
		y.ValueSize = 8
	}
	if y.ScanLength == 0 {
		y.ScanLength = 100
	}
	switch {
	case !slices.Contains([]string{"a", "b", "c", "e", "scan"}, strings.ToLower(y.Workload)):
		return fmt.Errorf("workload: ordered-index YCSB workload %q (want a, b, c, e or scan)", y.Workload)
	case y.Distribution != "uniform" && y.Distribution != "zipfian":
		return fmt.Errorf("workload: distribution %q (want uniform or zipfian)", y.Distribution)
	case y.Records <= 0 || y.ValueSize < 0 || y.ValueSize > btree.MaxValue || y.ScanLength < 1:
		return fmt.Errorf("workload: %d records of %d bytes, scans of %d", y.Records, y.ValueSize, y.ScanLength)
	}
	y.Workload = strings.ToLower(y.Workload)
	return nil
}

// value fills v with a value of record n.
func treeValue(v []byte, n int64, salt uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n)^salt)
	for i := range v {
		v[i] = b[i%8]
	}
}

// Load inserts y.Records records through trees, one goroutine per tree
// (several entries of the same tree: several tasks on it).
func (y *TreeYCSB) Load(ctx context.Context, trees []btree.Tree) error {
	if err := y.check(); err != nil {
		return err
	}
	var next atomic.Int64
	errs := make([]error, len(trees))
	var wg sync.WaitGroup
	for i, tr := range trees {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, v := make([]byte, 0, 8), make([]byte, y.ValueSize)
			for n := next.Add(1) - 1; n < y.Records; n = next.Add(1) - 1 {
				treeValue(v, n, 0)
				if err := tr.Put(ctx, TreeKey(k[:0], n), v); err != nil {
					errs[i] = fmt.Errorf("workload: loading record %d: %w", n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// chooser draws record numbers for one thread.
type chooser struct {
	r    *rand.Rand
	zipf *generator.ScrambledZipfian
	n    int64
}

func (c *chooser) next() int64 {
	if c.zipf != nil {
		return c.zipf.Next(c.r)
	}
	return c.r.Int63n(c.n)
}

// scan reads up to limit keys of tr from key from on.
func scan(ctx context.Context, tr btree.Tree, from []byte, limit int) error {
	it := tr.Scan(ctx, from, nil, limit)
	defer it.Close()
	for it.Next() {
	}
	return it.Err()
}

// Run runs the workload from y.Threads goroutines for y.Duration and
// measures every operation (a scan, with all its keys, is one).
func (y *TreeYCSB) Run(ctx context.Context, trees []btree.Tree) (Result, error) {
	if err := y.check(); err != nil {
		return Result{}, err
	}
	if len(trees) == 0 {
		return Result{}, errors.New("workload: no trees")
	}
	if y.Threads <= 0 {
		y.Threads = len(trees)
	}
	if y.Duration <= 0 {
		y.Duration = 2 * time.Second
	}
	reads := map[string]int{"a": 50, "b": 95, "c": 100}[y.Workload]
	var ops, nerr atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(y.Duration)
	for i := range y.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := trees[i%len(trees)]
			c := &chooser{r: rand.New(rand.NewSource(int64(i) + 1)), n: y.Records}
			if y.Distribution == "zipfian" {
				c.zipf = generator.NewScrambledZipfian(0, y.Records-1, generator.ZipfianConstant)
			}
			k, v := make([]byte, 0, 8), make([]byte, y.ValueSize)
			dst := make([]byte, 0, btree.MaxValue)
			local := make([]time.Duration, 0, 1<<14)
			for n := 0; ; n++ {
				if n&15 == 0 && (time.Now().After(deadline) || ctx.Err() != nil) {
					break
				}
				x := c.r.Intn(100)
				t0 := time.Now()
				var err error
				switch {
				case y.Workload == "scan":
					err = scan(ctx, tr, TreeKey(k[:0], c.next()), y.ScanLength)
				case y.Workload == "e" && x < 95:
					err = scan(ctx, tr, TreeKey(k[:0], c.next()), 1+c.r.Intn(y.ScanLength))
				case y.Workload == "e":
					rec := y.Records + y.inserted.Add(1) - 1
					treeValue(v, rec, 0)
					err = tr.Put(ctx, TreeKey(k[:0], rec), v)
				case x < reads:
					_, err = tr.Get(ctx, TreeKey(k[:0], c.next()), dst[:0])
				default:
					rec := c.next()
					treeValue(v, rec, uint64(n))
					err = tr.Put(ctx, TreeKey(k[:0], rec), v)
				}
				d := time.Since(t0)
				if err != nil && !errors.Is(err, btree.ErrNotFound) {
					nerr.Add(1)
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					if ctx.Err() != nil {
						break
					}
					continue
				}
				ops.Add(1)
				if len(local) < cap(local) {
					local = append(local, d)
				} else if n%8 == 0 {
					local[n%len(local)] = d
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	r := Result{Ops: ops.Load(), Errors: nerr.Load(), Elapsed: time.Since(start), FirstErr: first}
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
