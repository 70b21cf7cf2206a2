package ford

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// Technique is one of Smart's techniques that Smart-DTX applies to FORD;
// a SmartConfig switches each on or off for an ablation.
type Technique uint8

// Smart-DTX's techniques.
const (
	// Throttling is work-request throttling: a worker's lists wait for
	// credits (its outstanding work requests are bounded), the bound
	// chosen by the epoch tuner (Algorithm 1), or fixed by
	// SmartConfig.Limit.
	Throttling Technique = 1 << iota
	// Backoff is conflict-avoiding backoff: a lock CAS that finds the
	// record locked by a live transaction is retried after a truncated
	// exponential backoff with a dynamic limit (smart.Task.Backoff; its
	// base one measured round trip), up to MaxRetries times, instead of
	// aborting at once — where the wait can pay: the transaction has
	// not read the record (a read one has most likely changed by the
	// time the owner lets go, and its validation would fail) and holds
	// no other lock (no hold-and-wait). Otherwise it aborts as FORD does
	// and the abort counts toward the retry rate.
	Backoff
	// CoroutineThrottle is task throttling: the number of transactions a
	// worker runs at once (n_max, at most SmartConfig.Tasks) shrinks when
	// the lock retry rate is high and grows back when it is low.
	CoroutineThrottle

	// AllTechniques is Smart-DTX; none (0) is FORD+ — FORD on per-worker
	// QPs and CQs with Tasks transactions per worker.
	AllTechniques = Throttling | Backoff | CoroutineThrottle
)

// String names the techniques set.
func (t Technique) String() string {
	if t == 0 {
		return "none"
	}
	s := ""
	for _, n := range []struct {
		t    Technique
		name string
	}{{Throttling, "throttling"}, {Backoff, "backoff"}, {CoroutineThrottle, "coroutine-throttle"}} {
		if t&n.t != 0 {
			if s != "" {
				s += "+"
			}
			s += n.name
		}
	}
	return s
}

// SmartConfig makes a DB Smart-DTX (Config.Smart): its transactions run
// as tasks of a smart runtime, its post lists issued by the runtime's
// workers.
type SmartConfig struct {
	// Workers is the number of workers (default GOMAXPROCS); each has
	// its own CQ and its own QP to every node (worker-aware resources).
	Workers int
	// Tasks is the transactions a worker runs at once — Smart's
	// coroutines per thread (default 8); with CoroutineThrottle, the
	// largest n_max.
	Tasks int
	// Techniques are the techniques on (default none: set AllTechniques
	// for Smart-DTX).
	Techniques Technique
	// Limit, with Throttling, fixes the outstanding work requests of a
	// worker (no tuner); 0 tunes it (Algorithm 1, Tuner).
	Limit int
	Tuner smart.TunerConfig
	// MaxRetries bounds a lock's retries with Backoff (default 8): two
	// transactions waiting on each other's locks give up after it.
	MaxRetries int
	// C0 and BackoffLimit are the backoff's base and the bound of its
	// dynamic maximum. C0 0 (the default) is one round trip, as in
	// Smart: each worker's measured round trip (smart.BackoffConfig's
	// RoundTrip), from 2 µs until it has one; BackoffLimit defaults to
	// 1024 × C0.
	C0, BackoffLimit time.Duration
}

// withDefaults returns c with its defaults filled in.
func (c SmartConfig) withDefaults() SmartConfig {
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.Tasks <= 0 {
		c.Tasks = 8
	}
	if c.MaxRetries <= 0 {
		c.MaxRetries = 8
	}
	return c
}

// tunerSamples is the completions the throttling tuner counts at least
// per candidate limit (smart.TunerConfig.MinCompletions) unless
// SmartConfig.Tuner says otherwise: a worker completes a few hundred
// requests in Smart's Δ of 8 ms here, too few to compare limits by.
const tunerSamples = 300

// smartDefaults fills in Config.Smart's defaults (on a copy) and makes
// room for every worker's tasks: MaxTx at least Workers × Tasks unless
// set.
func (c *Config) smartDefaults() {
	if c.Smart == nil {
		return
	}
	s := c.Smart.withDefaults()
	c.Smart = &s
	if c.MaxTx <= 0 {
		c.MaxTx = max(64, s.Workers*s.Tasks)
	}
}

// smartIssuer is Smart-DTX's issuer. A transaction enters a task of a
// worker at begin (the coroutine throttle) and leaves it at end; its
// rounds are DoAll rounds of that task (the worker's QPs, under its
// credits); its lock conflicts back off. A coordinator always runs on the
// same worker (its index modulo the workers), so a lazy log truncation
// it posted goes before its next transaction's log WRITE on the same QP
// (RC order). The coordinators of no transaction (setup, recovery) use
// the direct issuer.
type smartIssuer struct {
	db    *DB
	fab   *fabric
	cfg   SmartConfig
	rt    *smart.Runtime
	slots []smartSlot // by coordinator index

	mu    sync.Mutex
	conns []*cm.Conn // the workers' connections
}

// smartSlot is what the issuer keeps of a coordinator; only the
// goroutine holding the coordinator touches it.
type smartSlot struct {
	txn     bool        // a transaction coordinator: on its worker's QPs
	task    *smart.Task // its transaction's task (nil between transactions)
	retries int         // failed lock attempts of the transaction
	aborted bool        // its last failed lock attempt aborted it
	lists   []smart.List
}

var _ issuer = (*smartIssuer)(nil)

// newSmartIssuer starts the runtime: a CQ per worker and a connection
// per worker and node.
func newSmartIssuer(ctx context.Context, db *DB, fab *fabric) (*smartIssuer, error) {
	cfg := *db.cfg.Smart
	s := &smartIssuer{db: db, fab: fab, cfg: cfg, slots: make([]smartSlot, len(db.coords))}
	connects := make([]smart.ConnectFunc, len(db.nodes))
	for i, n := range db.nodes {
		connects[i] = func(ctx context.Context, cq verbs.CQ) (verbs.QP, error) {
			c, err := cm.Dial(ctx, db.dev, n.addr, cm.Options{PD: db.pd, SendCQ: cq, RecvCQ: cq, Cap: qpCap,
				PrivateData: memnode.Hello{Token: db.cfg.Token}.Marshal()})
			if err != nil {
				return nil, fmt.Errorf("%w: node %s: %w", txn.ErrUnreachable, n.addr, err)
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			return c.QP(), nil
		}
	}
	on := func(t Technique) bool { return cfg.Techniques&t != 0 }
	rc := smart.Config{Device: db.dev, PD: db.pd, Nodes: connects, Workers: cfg.Workers, Sharing: smart.PerWorker,
		Throttle: on(Throttling) && cfg.Limit <= 0, Tuner: cfg.Tuner, CQDepth: 8192, Poll: db.cfg.Poll,
		Backoff: smart.BackoffConfig{C0: cfg.C0, Limit: cfg.BackoffLimit, Tasks: cfg.Tasks,
			Dynamic: on(Backoff), Throttle: on(CoroutineThrottle), RoundTrip: cfg.C0 == 0}}
	if rc.Tuner.MinCompletions == 0 {
		rc.Tuner.MinCompletions = tunerSamples
	}
	if on(Throttling) {
		rc.Limit = cfg.Limit
	}
	rt, err := smart.New(ctx, rc)
	if err != nil {
		s.close()
		return nil, err
	}
	s.rt = rt
	return s, nil
}

// close closes the workers' connections (their lists fail) and stops
// the runtime.
func (s *smartIssuer) close() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	if s.rt != nil {
		s.rt.Close()
	}
}

// worker is coordinator c's worker.
func (s *smartIssuer) worker(c *coord) *smart.Worker {
	ws := s.rt.Workers()
	return ws[c.idx%len(ws)]
}

// begin implements issuer: the transaction enters a task of its
// coordinator's worker, once fewer than n_max of the worker's run.
func (s *smartIssuer) begin(ctx context.Context, c *coord) error {
	t, err := s.worker(c).Enter(ctx)
	if err != nil {
		return txn.Abort(txn.Timeout, nil, err)
	}
	sl := &s.slots[c.idx]
	sl.txn, sl.task, sl.retries, sl.aborted = true, t, 0, false
	return nil
}

// end implements issuer: the task records the transaction's failed
// attempts — its failed lock CASes, and the transaction itself when it
// aborted (whatever the reason: a failed validation wastes the attempt
// as a lock conflict does) — for the retry rate of the backoff limit and
// of n_max, and leaves. A broken coordinator's task may still have lists
// in flight: it leaves once they are back, without holding up the
// caller.
func (s *smartIssuer) end(c *coord, committed bool) {
	sl := &s.slots[c.idx]
	t := sl.task
	if t == nil {
		return
	}
	sl.task = nil
	switch {
	case committed:
		t.Finished(sl.retries)
	case sl.aborted:
		t.Abandoned(sl.retries) // the last conflict was its end
	default:
		t.Abandoned(sl.retries + 1)
	}
	if c.broken {
		go t.Leave()
		return
	}
	t.Leave()
}

// conflict implements issuer: with Backoff, the task backs off (a
// random wait up to min(C_max, C0·2^k)) and the lock round runs again,
// at most MaxRetries times; else FORD's abort.
func (s *smartIssuer) conflict(c *coord, k int) bool {
	sl := &s.slots[c.idx]
	sl.retries++
	if s.cfg.Techniques&Backoff == 0 || sl.task == nil || k > s.cfg.MaxRetries {
		sl.aborted = true
		return false
	}
	sl.task.Backoff(k, rand.Float64())
	return true
}

// round implements issuer: the lists go out as one DoAll round of the
// transaction's task (a task of the coordinator's worker for the round
// outside a transaction: Close's release).
func (s *smartIssuer) round(ctx context.Context, c *coord, lists []list) error {
	sl := &s.slots[c.idx]
	if !sl.txn {
		return s.fab.round(ctx, c, lists)
	}
	if len(lists) == 0 {
		return nil
	}
	if err := s.routable(c, lists); err != nil {
		return err
	}
	t := sl.task
	if t == nil {
		var err error
		if t, err = s.worker(c).Enter(ctx); err != nil {
			return err
		}
		defer func() {
			if c.broken {
				go t.Leave()
				return
			}
			t.Leave()
		}()
	}
	s.db.stats.lists.Add(uint64(len(lists)))
	s.db.stats.rounds.Add(1)
	sl.lists = sl.lists[:0]
	for _, l := range lists {
		sl.lists = append(sl.lists, smart.List{Node: l.node, WRs: l.wrs})
	}
	err := t.DoAll(ctx, sl.lists)
	if err == nil {
		return nil
	}
	// Lists may be left in flight (an ended context, a closed runtime):
	// wait them out (bounded) before the buffers are reused.
	if !t.WaitFor(drainWait) {
		c.broken = true
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctx.Err()
	}
	return fmt.Errorf("%w: %w", txn.ErrUnreachable, err)
}

// post implements issuer: the lists go out on the coordinator's
// worker's QPs without a wait (their completions return credits only).
func (s *smartIssuer) post(c *coord, lists []list) error {
	if !s.slots[c.idx].txn {
		return s.fab.post(c, lists)
	}
	if err := s.routable(c, lists); err != nil {
		return err
	}
	s.db.stats.lists.Add(uint64(len(lists)))
	w := s.worker(c)
	for _, l := range lists {
		if err := w.Post(context.Background(), smart.List{Node: l.node, WRs: l.wrs}); err != nil {
			return fmt.Errorf("%w: %w", txn.ErrUnreachable, err)
		}
	}
	return nil
}

// routable refuses lists to a node that is out of the configuration the
// coordinator's transaction routes by, as the direct issuer does: its
// copies are no longer the shard's, and the client renews its view.
func (s *smartIssuer) routable(c *coord, lists []list) error {
	for _, l := range lists {
		if s.db.nodes[l.node] == nil || c.v.out(l.node) {
			s.db.kickRenew()
			return fmt.Errorf("%w: node %d is out of epoch %d", txn.ErrUnreachable, l.node, c.v.conf.Epoch)
		}
	}
	return nil
}

// SmartStats returns each worker's figures (current work-request limit,
// credits, backoff maximum, retry rate, n_max) of a Smart-DTX DB; nil for
// plain FORD.
func (db *DB) SmartStats() []smart.Stats {
	if db.sdtx == nil {
		return nil
	}
	var out []smart.Stats
	for _, w := range db.sdtx.rt.Workers() {
		out = append(out, w.Stats())
	}
	return out
}
