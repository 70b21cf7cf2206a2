package smart

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Sharing says how workers share QPs and submission paths — the
// strategies Smart compares (Fig. 3). In software a submission path is the
// lock a post takes: the QP's own, plus a runtime-wide one when the path
// is shared (the "doorbell").
type Sharing int

// Sharing modes.
const (
	// PerWorker: every worker has its own QP per node and its own
	// submission path (Smart's per-thread doorbell; the default).
	PerWorker Sharing = iota
	// SharedPath: per-worker QPs, but every post goes through one
	// runtime-wide lock (per-thread QPs on a shared doorbell).
	SharedPath
	// Multiplexed: Config.Multiplex workers share each QP.
	Multiplexed
	// SharedQP: all workers share one QP per node.
	SharedQP
)

func (s Sharing) String() string {
	switch s {
	case PerWorker:
		return "per-worker"
	case SharedPath:
		return "shared-path"
	case Multiplexed:
		return "multiplexed"
	case SharedQP:
		return "shared-qp"
	}
	return fmt.Sprintf("Sharing(%d)", int(s))
}

// ConnectFunc returns a QP connected to a remote node, sending its
// completions to cq (the caller's side; the remote side is the node's
// business, e.g. a cm.Listener in `rdmakit node`).
type ConnectFunc func(ctx context.Context, cq verbs.CQ) (verbs.QP, error)

// Config configures a Runtime.
type Config struct {
	// Device is the one device context every worker shares (Smart's
	// shared context, PD and regions).
	Device verbs.Device
	// PD is the shared protection domain; its regions are the local
	// buffers of every task.
	PD verbs.PD
	// Nodes connect to the remote memory nodes, one function per node.
	Nodes []ConnectFunc
	// Workers is the number of workers (default 1).
	Workers int
	// Sharing and Multiplex choose the QP sharing (see Sharing).
	Sharing   Sharing
	Multiplex int
	// Throttle enables adaptive work-request throttling with the tuner
	// (Tuner configures it); a fixed Limit (> 0) disables the tuner.
	Throttle bool
	Limit    int
	Tuner    TunerConfig
	// Backoff configures conflict avoidance; its Tasks is each worker's
	// task limit n_max.
	Backoff BackoffConfig
	// CQDepth is each worker's CQ depth (default 1024).
	CQDepth int
	// Poll is how an idle worker waits for completions (default
	// adaptive).
	Poll verbs.PollPolicy
	// Gather makes a worker gather the lists its tasks post at the same
	// time into one post — one doorbell, one frame on tcp — as the
	// coroutines of one Smart thread post back to back: the first poster
	// yields once, then posts everything pending. Only with PerWorker
	// sharing (a QP of its own per worker and node).
	Gather bool
	// Router routes the completions of the workers' CQs. The runtime
	// registers its tasks' handler on it and tags their wr_ids; requests
	// that others post on the workers' QPs carry tags of their own, and
	// the workers' pollers hand their completions to their handlers (an
	// error a handler returns is dropped: a poller has no connection to
	// fail). Nil: the runtime makes its own (Runtime.Router).
	Router *verbs.Router
}

// Runtime runs tasks on workers over a set of remote nodes.
type Runtime struct {
	cfg     Config
	workers []*Worker
	path    sync.Mutex // the shared submission path (SharedPath)
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	tasks   taskTable
	nextID  atomic.Uint32
	router  *verbs.Router
	tag     verbs.Tag // the tasks' wr_ids carry it
}

// New builds the workers, their CQs and QPs, and starts their pollers.
func New(ctx context.Context, c Config) (*Runtime, error) {
	if c.Device == nil || c.PD == nil || len(c.Nodes) == 0 {
		return nil, fmt.Errorf("%w: smart needs a device, a PD and nodes", verbs.ErrInvalidArg)
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.CQDepth == 0 {
		c.CQDepth = 1024
	}
	if c.Multiplex <= 0 {
		c.Multiplex = 2
	}
	if c.Poll == (verbs.PollPolicy{}) {
		c.Poll = verbs.PollAdaptive
	}
	c.Backoff.defaults()
	r := &Runtime{cfg: c, router: c.Router}
	if r.router == nil {
		r.router = new(verbs.Router)
	}
	var err error
	if r.tag, err = r.router.Register(r.complete); err != nil {
		return nil, fmt.Errorf("smart: %w", err)
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for i := 0; i < c.Workers; i++ {
		cq, err := c.Device.CreateCQ(c.CQDepth)
		if err != nil {
			r.Close()
			return nil, err
		}
		limit := Unlimited
		if c.Limit > 0 {
			limit = c.Limit
		}
		w := &Worker{rt: r, id: i, cq: cq, qps: make([]verbs.QP, len(c.Nodes)),
			throttle: NewThrottle(limit, c.Throttle || c.Limit > 0), backoff: NewBackoff(c.Backoff),
			wc: make([]verbs.WC, 64)}
		if c.Throttle && c.Limit <= 0 {
			w.tuner = NewTuner(c.Tuner)
		}
		w.slots = make(chan struct{}, c.Backoff.Tasks)
		r.workers = append(r.workers, w)
	}
	// QPs: who owns the QP of (worker, node) depends on the sharing.
	for n, connect := range c.Nodes {
		for i, w := range r.workers {
			owner := i
			switch c.Sharing {
			case Multiplexed:
				owner = i / c.Multiplex * c.Multiplex
			case SharedQP:
				owner = 0
			}
			if owner != i {
				w.qps[n] = r.workers[owner].qps[n]
				continue
			}
			qp, err := connect(ctx, w.cq)
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("smart: connect worker %d to node %d: %w", i, n, err)
			}
			w.qps[n] = qp
		}
	}
	for _, w := range r.workers {
		if c.Gather && c.Sharing == PerWorker {
			w.gather = make([]verbs.Combiner, len(c.Nodes))
			for n := range c.Nodes {
				w.gather[n] = w.gatherer(n)
			}
		}
		r.wg.Add(1)
		go w.poll()
	}
	return r, nil
}

// Workers returns the runtime's workers.
func (r *Runtime) Workers() []*Worker { return r.workers }

// Router is the router of the workers' completions (Config.Router or the
// runtime's own): register on it to post requests of your own on the
// workers' QPs and have the workers' pollers deliver their completions.
func (r *Runtime) Router() *verbs.Router { return r.router }

// Close stops the pollers. Tasks still waiting fail with ErrClosed.
func (r *Runtime) Close() {
	r.cancel()
	r.wg.Wait()
	r.router.Unregister(r.tag)
	for _, w := range r.workers {
		w.mu.Lock()
		w.closed = true
		w.failWaiters()
		for ; w.withheld > 0; w.withheld-- { // the withheld slots go to Enter
			<-w.slots
		}
		w.mu.Unlock()
	}
	for _, t := range r.tasks.all() {
		t.finish(verbs.WC{Status: verbs.StatusWRFlushErr})
	}
}

// Worker owns a CQ, a QP per remote node (shared per the Sharing mode),
// a credit counter with its tuner, and a conflict-avoidance controller. Its
// tasks run as goroutines, at most n_max at once.
type Worker struct {
	rt       *Runtime
	id       int
	cq       verbs.CQ
	qps      []verbs.QP
	throttle *Throttle
	tuner    *Tuner
	backoff  *Backoff
	slots    chan struct{} // running tasks (n_max)
	wc       []verbs.WC

	mu        sync.Mutex      // throttle, backoff, counters
	queue     []*creditWaiter // lists waiting for credits, in arrival order
	closed    bool
	completed uint64
	running   int
	withheld  int              // slots the task throttle holds (n_max below its largest)
	idle      []*Task          // ended tasks, for Enter to reuse
	gather    []verbs.Combiner // per node, with Gather
	rtt       atomic.Int64     // the moving mean of its rounds' round trips (ns)
}

// roundTrip folds the round trip of one of the worker's lists or rounds
// into its moving mean (weight 1/8). Concurrent tasks may lose an update
// of each other's: the mean stays a mean.
func (w *Worker) roundTrip(d time.Duration) {
	old := w.rtt.Load()
	if old == 0 {
		w.rtt.Store(int64(d))
		return
	}
	w.rtt.Store(old + (int64(d)-old)/8)
}

// RoundTrip returns the moving mean of the worker's round trips (a list
// posted to its completion, credit waits included); 0 before the first.
func (w *Worker) RoundTrip() time.Duration { return time.Duration(w.rtt.Load()) }

// ID is the worker's index.
func (w *Worker) ID() int { return w.id }

// Stats is what a worker reports about its techniques.
type Stats struct {
	Limit       int           // current work-request limit (C_max of throttling)
	Credits     int           // credits left
	Completed   uint64        // work requests completed
	BackoffC0   time.Duration // current backoff base (C0)
	BackoffCMax time.Duration // current backoff maximum
	RetryRate   float64       // retry rate at the last evaluation
	Tasks       int           // n_max
}

// Stats returns the worker's current figures.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{Limit: w.throttle.Limit(), Credits: w.throttle.Credits(), Completed: w.completed,
		BackoffC0: w.backoff.C0(), BackoffCMax: w.backoff.CMax(), RetryRate: w.backoff.RetryRate(), Tasks: w.backoff.Tasks()}
}

// Go runs f as a task of the worker, once fewer than n_max of its tasks
// run. It returns when f returns.
func (w *Worker) Go(ctx context.Context, f func(t *Task) error) error {
	t, err := w.Enter(ctx)
	if err != nil {
		return err
	}
	defer t.Leave()
	return f(t)
}

// Enter starts a task of the worker for a caller that runs its lists
// without a callback (a store client's operation, say), once fewer than
// n_max of the worker's tasks run, as Go does. The caller ends it with
// Leave. Tasks are reused: Enter allocates only when the worker has no
// idle one.
func (w *Worker) Enter(ctx context.Context) (*Task, error) {
	// A running task holds a slot; so does every slot the task throttle
	// withholds (Leave keeps the slot of a leaving task while n_max says
	// fewer tasks may run): the wait for a slot parks, no polling.
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	w.mu.Lock()
	w.running++
	var t *Task
	if k := len(w.idle); k > 0 {
		t, w.idle = w.idle[k-1], w.idle[:k-1]
	}
	w.mu.Unlock()
	if t == nil {
		t = &Task{w: w, done: make(chan verbs.WC, 1), wake: make(chan struct{}, 1)}
		t.id = w.rt.nextID.Add(1)
		w.rt.tasks.store(t)
	} else {
		select { // a flushed request's completion after a failed list
		case <-t.done:
		default:
		}
		select { // a wake-up a settled round left
		case <-t.wake:
		default:
		}
	}
	t.ctx = ctx
	return t, nil
}

// resize withholds or gives back slots after n_max changed: shrinking
// takes effect as running tasks leave (Leave withholds their slots),
// growing at once. The caller holds w.mu.
func (w *Worker) resize() {
	for w.withheld > 0 && w.withheld > cap(w.slots)-w.backoff.Tasks() {
		select {
		case <-w.slots:
			w.withheld--
		default:
			return
		}
	}
}

// Leave ends a task that Enter started. A task whose last list or round
// is still in flight (its Do or DoAll returned early because its context
// ended) waits for its completion first, so its buffers may be reused.
func (t *Task) Leave() {
	t.drain()
	w := t.w
	t.ctx = nil // before another Enter may take it
	w.mu.Lock()
	w.running--
	if t.pending == 0 && t.owed.Load() == 0 {
		w.idle = append(w.idle, t)
	} else {
		w.rt.tasks.remove(t.id) // never completed (the runtime closed): retire it
	}
	if !w.closed && w.withheld < cap(w.slots)-w.backoff.Tasks() {
		w.withheld++ // the task throttle keeps the slot
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	<-w.slots
}

// post puts a list on node's QP through the worker's submission path.
// With Gather it reports failures as error completions (dispatched to
// the lists' tasks) and returns nil.
func (w *Worker) post(node int, wrs []verbs.SendWR) error {
	if w.rt.cfg.Gather && w.rt.cfg.Sharing == PerWorker {
		w.gather[node].Submit(wrs...)
		return nil
	}
	if w.rt.cfg.Sharing == SharedPath {
		w.rt.path.Lock()
		defer w.rt.path.Unlock()
	}
	return w.qps[node].PostSend(wrs)
}

// gatherer returns a combiner for the lists w's tasks post to node n: a
// failed post fails the lists it carried through error completions.
func (w *Worker) gatherer(n int) verbs.Combiner {
	qp := w.qps[n]
	return verbs.Combiner{Post: qp.PostSend, Yield: true, Fail: func(batch []verbs.SendWR, err error) {
		// The requests from the failed one on never run: fail their lists
		// through their signaled requests.
		from := 0
		var pe *verbs.PostError
		if errors.As(err, &pe) {
			from = pe.Index
		}
		for i := from; i < len(batch); i++ {
			if batch[i].Flags&verbs.FlagSignaled != 0 {
				w.rt.dispatch(&verbs.WC{ID: batch[i].ID, Status: verbs.StatusWRFlushErr, Opcode: verbs.WCSend})
			}
		}
	}}
}

// poll is the worker's poller: it dispatches completions to tasks,
// returns credits and drives the tuner and the backoff controller.
func (w *Worker) poll() {
	defer w.rt.wg.Done()
	ctx := w.rt.ctx
	tick := time.Now()
	for {
		n, err := verbs.PollWait(ctx, w.cq, w.wc, w.rt.cfg.Poll)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return
			}
			if ctx.Err() != nil {
				return
			}
		}
		for rest := w.wc[:n]; len(rest) > 0; {
			k, err := w.rt.router.Dispatch(rest)
			if err == nil {
				break
			}
			rest = rest[k:] // another user's handler failed: route the rest
		}
		if now := time.Now(); now.Sub(tick) >= 500*time.Microsecond {
			tick = now
			w.rt.tickAll(now)
		}
	}
}

// wrID is the wr_id of a task's request: the runtime's tag | task id (32
// bits) | worker (16) | list size (8: at most MaxBatch).
func (r *Runtime) wrID(task uint32, worker, size int) uint64 {
	return r.tag.ID(uint64(task)<<24 | uint64(worker&0xffff)<<8 | uint64(size&0xff))
}

// complete is the runtime's router handler: it dispatches a completion
// of a task's request.
func (r *Runtime) complete(wc *verbs.WC) error {
	r.dispatch(wc)
	return nil
}

// dispatch returns a completion's credits to the posting worker and wakes
// its task.
func (r *Runtime) dispatch(wc *verbs.WC) {
	low := wc.ID & verbs.LowMask
	worker, size, task := int(low>>8&0xffff), int(low&0xff), uint32(low>>24)
	if worker < len(r.workers) {
		w := r.workers[worker]
		w.mu.Lock()
		w.throttle.Release(size)
		w.completed += uint64(size)
		w.grant()
		w.mu.Unlock()
	}
	if t := r.tasks.load(task); t != nil {
		t.finish(*wc)
	}
}

// tickAll advances every worker's tuner and backoff controller.
func (r *Runtime) tickAll(now time.Time) {
	for _, w := range r.workers {
		w.mu.Lock()
		if w.tuner != nil {
			if limit, changed := w.tuner.Tick(now, w.completed); changed {
				w.throttle.SetLimit(limit)
				w.grant()
			}
		}
		w.backoff.Rebase(w.RoundTrip())
		if w.backoff.Tick(now) {
			w.resize()
		}
		w.mu.Unlock()
	}
}
