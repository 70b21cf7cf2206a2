package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rdmakit/rdmakit/txn"
)

// TxnRun configures RunTxn.
type TxnRun struct {
	// Threads is the number of goroutines, each running one transaction
	// at a time (default 8).
	Threads int
	// Duration is how long they start new transactions (default 2 s);
	// the ones under way then finish.
	Duration time.Duration
	// Seed seeds goroutine i's source with Seed+i (0: from the clock).
	Seed int64
	// Trace, when set, is called with the trace of every committed
	// transaction (the target's Tx must implement txn.Traced), from the
	// goroutine that committed it: it must be safe for concurrent use and
	// must not keep the slices (check.History.Add copies them).
	Trace func(reads, writes []txn.Access)
}

// TxnKindResult is one kind of transaction's tally.
type TxnKindResult struct {
	Name      string
	Committed int64
	Rejected  int64
	Delta     int64 // the committed transactions' change to the total balance
}

// TxnResult is a transaction run's outcome.
type TxnResult struct {
	Elapsed time.Duration
	// Committed counts committed transactions, read-only ones included;
	// Rejected the ones their own logic rolled back (ErrRejected).
	Committed, Rejected int64
	// Unknown counts transactions whose outcome is unknown (an error
	// wrapping txn.ErrUnreachable: they may have committed).
	Unknown int64
	// Failed counts the other errors; FirstErr is the first of them (or
	// of the unknown outcomes).
	Failed   int64
	FirstErr error
	// Aborts counts aborted attempts by reason (index txn.Reason); every
	// committed or rejected transaction also ran once more.
	Aborts [txn.UserAbort + 1]int64
	// Latency of committed transactions, from the first attempt's start
	// to the commit (retries included).
	P50, P99, Mean time.Duration
	// Delta is the committed transactions' change to the total balance
	// (SmallBank's money: deposits minus withdrawals).
	Delta int64
	Kinds []TxnKindResult
}

// Rate returns committed transactions per second.
func (r *TxnResult) Rate() float64 { return float64(r.Committed) / r.Elapsed.Seconds() }

// TotalAborts returns the aborted attempts of every reason.
func (r *TxnResult) TotalAborts() int64 {
	var n int64
	for _, a := range r.Aborts {
		n += a
	}
	return n
}

// AbortRate returns aborted attempts per committed transaction.
func (r *TxnResult) AbortRate() float64 {
	if r.Committed == 0 {
		return 0
	}
	return float64(r.TotalAborts()) / float64(r.Committed)
}

// TxnExec runs one operation on a target and returns its delta, as
// TxnWorkload.Exec does on a txn.DB. A target that retries aborts itself
// (a SQL peer retrying serialization failures) reports each aborted
// attempt with s.Abort.
type TxnExec[O any] func(ctx context.Context, s *TxnSession, op O) (delta int64, err error)

// TxnSession is one of RunTxn's goroutines: it tallies what its
// transactions did.
type TxnSession struct {
	ID     int // 0 to Threads-1
	aborts [txn.UserAbort + 1]int64
	probe  probe
}

// Abort counts an aborted attempt of reason r.
func (s *TxnSession) Abort(r txn.Reason) {
	if int(r) < len(s.aborts) {
		s.aborts[r]++
	}
}

// RunTxn runs w's operations on db from cfg.Threads goroutines for
// cfg.Duration (w.Exec through txn.Run, aborts counted by reason,
// committed traces handed to cfg.Trace) and measures them.
func RunTxn[O any](ctx context.Context, cfg TxnRun, w TxnWorkload[O], db txn.DB) (*TxnResult, error) {
	return RunTxnFunc(ctx, cfg, w, func(ctx context.Context, s *TxnSession, op O) (int64, error) {
		s.probe.db = db
		return w.Exec(ctx, &s.probe, op)
	})
}

// RunTxnFunc is RunTxn on any target: exec runs each operation w draws.
// cfg.Trace applies to txn.DB targets only (RunTxn).
func RunTxnFunc[O any](ctx context.Context, cfg TxnRun, w TxnWorkload[O], exec TxnExec[O]) (*TxnResult, error) {
	if cfg.Threads <= 0 {
		cfg.Threads = 8
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 2 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()
	}
	workers := make([]*txnWorker, cfg.Threads)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for i := range workers {
		wk := newTxnWorker(i, len(w.Kinds()), cfg)
		workers[i] = wk
		wg.Add(1)
		go func() {
			defer wg.Done()
			runWorker(ctx, wk, deadline, w, exec)
		}()
	}
	wg.Wait()
	return merge(w.Kinds(), workers, time.Since(start))
}

// txnWorker is one goroutine's state and tally.
type txnWorker struct {
	s                           TxnSession
	r                           *rand.Rand
	lat                         *hdrhistogram.Histogram
	committed, rejected, deltas []int64
	unknown, failed             int64
	first                       error
}

// Latencies from 1 µs to 100 s, two significant digits.
const (
	latLowest  = int64(time.Microsecond)
	latHighest = int64(100 * time.Second)
)

// newTxnWorker makes worker i.
func newTxnWorker(i, kinds int, cfg TxnRun) *txnWorker {
	wk := &txnWorker{r: rand.New(rand.NewSource(cfg.Seed + int64(i))),
		lat:       hdrhistogram.New(latLowest, latHighest, 2),
		committed: make([]int64, kinds), rejected: make([]int64, kinds), deltas: make([]int64, kinds)}
	wk.s.ID = i
	wk.s.probe.s = &wk.s
	wk.s.probe.trace = cfg.Trace
	return wk
}

// runWorker runs operations until the deadline or ctx's end.
func runWorker[O any](ctx context.Context, wk *txnWorker, deadline time.Time, w TxnWorkload[O], exec TxnExec[O]) {
	for ctx.Err() == nil {
		t0 := time.Now()
		if t0.After(deadline) {
			return
		}
		op := w.Next(wk.r)
		k := w.KindOf(op)
		delta, err := exec(ctx, &wk.s, op)
		switch {
		case err == nil && wk.s.probe.err != nil:
			wk.failed++
			wk.remember(wk.s.probe.err)
			wk.s.probe.err = nil
		case err == nil:
			wk.committed[k]++
			wk.deltas[k] += delta
			_ = wk.lat.RecordValue(max(int64(time.Since(t0)), latLowest))
		case errors.Is(err, ErrRejected):
			wk.rejected[k]++
		case ctx.Err() != nil:
			return // the run's end, not the transaction's failure
		case errors.Is(err, txn.ErrUnreachable):
			wk.unknown++
			wk.remember(err)
		default:
			wk.failed++
			wk.remember(err)
		}
	}
}

// remember keeps the worker's first error.
func (wk *txnWorker) remember(err error) {
	if wk.first == nil {
		wk.first = err
	}
}

// merge adds up the workers' tallies.
func merge(kinds []string, workers []*txnWorker, elapsed time.Duration) (*TxnResult, error) {
	res := &TxnResult{Elapsed: elapsed, Kinds: make([]TxnKindResult, len(kinds))}
	lat := hdrhistogram.New(latLowest, latHighest, 2)
	for k, name := range kinds {
		res.Kinds[k].Name = name
	}
	for _, wk := range workers {
		for k := range kinds {
			res.Kinds[k].Committed += wk.committed[k]
			res.Kinds[k].Rejected += wk.rejected[k]
			res.Kinds[k].Delta += wk.deltas[k]
		}
		for r, n := range wk.s.aborts {
			res.Aborts[r] += n
		}
		res.Unknown += wk.unknown
		res.Failed += wk.failed
		if res.FirstErr == nil {
			res.FirstErr = wk.first
		}
		lat.Merge(wk.lat)
	}
	for _, k := range res.Kinds {
		res.Committed += k.Committed
		res.Rejected += k.Rejected
		res.Delta += k.Delta
	}
	res.P50 = time.Duration(lat.ValueAtPercentile(50))
	res.P99 = time.Duration(lat.ValueAtPercentile(99))
	res.Mean = time.Duration(lat.Mean())
	if res.Committed == 0 && res.FirstErr != nil {
		return res, fmt.Errorf("workload: no transaction committed: %w", res.FirstErr)
	}
	return res, nil
}

// ErrNotTraced: RunTxn or a loader was asked for traces and the DB's Tx
// does not implement txn.Traced.
var ErrNotTraced = errors.New("workload: the DB's transactions do not implement txn.Traced")

// probe is a session's view of the target DB: it passes every call on,
// counts aborts by reason and hands committed traces to trace. Begin
// returns the probe itself (a goroutine runs one transaction at a time),
// so the hot path allocates nothing for it.
type probe struct {
	db     txn.DB
	tx     txn.Tx
	s      *TxnSession
	trace  func(reads, writes []txn.Access)
	reason txn.Reason // the abort an operation of this attempt returned
	err    error      // a committed transaction without a trace
}

var (
	_ txn.DB = (*probe)(nil)
	_ txn.Tx = (*probe)(nil)
)

// Begin starts a transaction of the target.
func (p *probe) Begin(ctx context.Context) (txn.Tx, error) {
	tx, err := p.db.Begin(ctx)
	if err != nil {
		p.count(txn.ReasonOf(err))
		return nil, err
	}
	p.tx, p.reason = tx, 0
	return p, nil
}

// Close does nothing: the target belongs to RunTxn's caller.
func (p *probe) Close() error { return nil }

// count counts an abort of reason r (0: none).
func (p *probe) count(r txn.Reason) {
	if r != 0 && p.s != nil {
		p.s.Abort(r)
	}
}

// note remembers the reason of an operation's abort, if it was one.
func (p *probe) note(err error) error {
	if err != nil && !errors.Is(err, txn.ErrNotFound) && !errors.Is(err, txn.ErrExists) {
		if r := txn.ReasonOf(err); r != 0 {
			p.reason = r
		}
	}
	return err
}

// Get passes on.
func (p *probe) Get(key []byte) ([]byte, error) {
	v, err := p.tx.Get(key)
	return v, p.note(err)
}

// Put passes on.
func (p *probe) Put(key, value []byte) error { return p.note(p.tx.Put(key, value)) }

// Insert passes on.
func (p *probe) Insert(key, value []byte) error { return p.note(p.tx.Insert(key, value)) }

// Delete passes on.
func (p *probe) Delete(key []byte) error { return p.note(p.tx.Delete(key)) }

// Abort passes on and counts the attempt's abort, if an operation
// returned one.
func (p *probe) Abort() {
	p.tx.Abort()
	p.count(p.reason)
	p.reason = 0
}

// Commit passes on, counts an abort and hands a committed trace on.
func (p *probe) Commit() error {
	err := p.tx.Commit()
	if err != nil {
		p.count(txn.ReasonOf(err))
		p.reason = 0
		return err
	}
	if p.trace != nil {
		t, ok := p.tx.(txn.Traced)
		if !ok {
			p.err = ErrNotTraced
			return nil
		}
		p.trace(t.Trace())
	}
	return nil
}
