package sherman

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/verbs"
)

// issuer runs the tree's post lists on the memory nodes. It is the seam
// between the tree and the machinery that carries its requests: the
// tree builds lists of READs, WRITEs and atomics against a slot's
// buffer and hands them to do, and knows nothing of QPs, CQs or
// pollers. Sherman's issuer (qpIssuer) posts each list on the client's
// one QP to that memory node and waits on a shared poller; Smart-BT's
// issuer runs each list as a task of a smart.Runtime (its workers' QPs,
// credits and throttling) without the tree changing.
type issuer interface {
	// acquire takes a free slot (its buffer holds an operation's
	// reads and writes), waiting while all are in use.
	acquire(ctx context.Context) (*slot, error)
	// do posts wrs as one list (the last one signaled) on memory node
	// mn and waits for it. When ctx ends first it returns ctx's error
	// (wrapped with errInFlight) and the slot is released once the list
	// completes: the caller must not use it any more.
	do(ctx context.Context, s *slot, mn int, wrs []verbs.SendWR) error
	// release returns a slot whose last list completed.
	release(s *slot)
	// conflict waits before the next try after the try-th failed lock
	// CAS of the operation holding s (try from 0).
	conflict(ctx context.Context, s *slot, try int) error
	// trips counts the lists run (each one round trip).
	trips() uint64
	// readBytes counts the bytes the lists' READs read.
	readBytes() uint64
	// close stops the pollers and frees the slots' memory.
	close() error
}

// slot is an operation's registered buffer.
type slot struct {
	idx  int
	buf  []byte
	addr uint64
	lkey uint32

	list []verbs.SendWR    // a list being built, reused
	sgl  [maxRun]verbs.SGE // the read path's SGEs (one per READ), reused
	leaf node              // Get's leaf, decoded in place (its slices reused)
	path [8]uint64         // backing of leafFor's path

	mu        sync.Mutex
	abandoned bool // its caller left: the poller releases it
	done      chan verbs.WC
}

// sge is the SGE of the slot's bytes [off, off+n).
func (s *slot) sge(off, n int) verbs.SGE {
	return verbs.SGE{Addr: s.addr + uint64(off), Length: uint32(n), LKey: s.lkey}
}

// Conn is a client's connection to one memory node holding the tree: a
// connected RC QP, the CQ of its send completions (only this client's
// requests on it), and the node's region the tree lives in.
type Conn struct {
	QP     verbs.QP
	CQ     verbs.CQ
	Region Region
}

// Region is a remote region: its address, length and remote key.
type Region struct {
	Addr uint64
	Len  uint64
	RKey uint32
}

// qpIssuer posts on one QP per memory node; a goroutine per node polls
// its CQ and hands each completion to its slot (wr_id = slot index).
type qpIssuer struct {
	conns []Conn
	mr    verbs.MR
	slots []*slot
	free  chan *slot
	n     atomic.Uint64
	read  atomic.Uint64
	stop  context.CancelFunc
	wg    sync.WaitGroup
	poll  verbs.PollPolicy
	dead  chan struct{} // closed when a poller fails
	err   atomic.Value  // its error
	once  sync.Once
}

func newQPIssuer(pd verbs.PD, conns []Conn, nslots, size int, poll verbs.PollPolicy) (*qpIssuer, error) {
	mr, err := pd.AllocMR(nslots*size, verbs.AccessLocalWrite)
	if err != nil {
		return nil, fmt.Errorf("sherman: slot buffers: %w", err)
	}
	q := &qpIssuer{conns: conns, mr: mr, free: make(chan *slot, nslots), poll: poll, dead: make(chan struct{})}
	for i := range nslots {
		s := &slot{idx: i, buf: mr.Bytes()[i*size : (i+1)*size : (i+1)*size], addr: mr.Addr() + uint64(i*size), lkey: mr.LKey(), done: make(chan verbs.WC, 4)}
		q.slots = append(q.slots, s)
		q.free <- s
	}
	ctx, stop := context.WithCancel(context.Background())
	q.stop = stop
	for _, c := range conns {
		q.wg.Add(1)
		go q.poller(ctx, c.CQ)
	}
	return q, nil
}

// poller delivers completions to their slots until ctx ends.
func (q *qpIssuer) poller(ctx context.Context, cq verbs.CQ) {
	defer q.wg.Done()
	wc := make([]verbs.WC, 32)
	for {
		n, err := verbs.PollWait(ctx, cq, wc, q.poll)
		if err != nil {
			if ctx.Err() == nil {
				q.err.Store(err)
				q.once.Do(func() { close(q.dead) })
			}
			return
		}
		for i := range n {
			id := wc[i].ID
			if id >= uint64(len(q.slots)) {
				continue
			}
			s := q.slots[id]
			s.mu.Lock()
			if s.abandoned {
				s.abandoned = false
				s.mu.Unlock()
				q.free <- s
				continue
			}
			select {
			case s.done <- wc[i]:
			default: // a second completion of a failed list
			}
			s.mu.Unlock()
		}
	}
}

func (q *qpIssuer) acquire(ctx context.Context) (*slot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case s := <-q.free:
		for len(s.done) > 0 { // leftovers of a failed list
			<-s.done
		}
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-q.dead:
		return nil, fmt.Errorf("%w: %v", btree.ErrUnreachable, q.err.Load())
	}
}

func (q *qpIssuer) do(ctx context.Context, s *slot, mn int, wrs []verbs.SendWR) error {
	for i := range wrs {
		wrs[i].ID = uint64(s.idx)
		wrs[i].Flags &^= verbs.FlagSignaled
	}
	wrs[len(wrs)-1].Flags |= verbs.FlagSignaled
	q.n.Add(1)
	q.read.Add(readLen(wrs))
	if err := verbs.PostAll(q.conns[mn].QP, wrs, noProgress, ctx.Done()); err != nil {
		return fmt.Errorf("%w: post: %w", btree.ErrUnreachable, err)
	}
	select {
	case wc := <-s.done:
		return wcErr(wc)
	case <-ctx.Done():
	case <-q.dead:
	}
	s.mu.Lock()
	select {
	case wc := <-s.done:
		s.mu.Unlock()
		return wcErr(wc)
	default:
	}
	s.abandoned = true
	s.mu.Unlock()
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", errInFlight, ctx.Err())
	}
	return fmt.Errorf("%w: %w: %v", errInFlight, btree.ErrUnreachable, q.err.Load())
}

// wcErr: a CONDITIONAL request whose guard failed completes skipped;
// the caller tells from the guard's word.
func wcErr(wc verbs.WC) error {
	if wc.Status == verbs.StatusSuccess || wc.Status == verbs.StatusSkipped {
		return nil
	}
	return fmt.Errorf("%w: %v: %w", btree.ErrUnreachable, wc.Opcode, wc.Status.Err())
}

func (q *qpIssuer) release(s *slot) { q.free <- s }

func (q *qpIssuer) trips() uint64 { return q.n.Load() }

func (q *qpIssuer) readBytes() uint64 { return q.read.Load() }

// conflict: Sherman's pause (yield, then sleep growing to 1 ms).
func (q *qpIssuer) conflict(ctx context.Context, _ *slot, try int) error { return pause(ctx, try) }

func (q *qpIssuer) close() error {
	q.stop()
	q.wg.Wait()
	return q.mr.Deregister()
}

// errInFlight: the caller stopped waiting for a list that is still in
// flight; the issuer releases its slot when it completes.
var errInFlight = errors.New("sherman: left a list in flight")

// noProgress: completions are the pollers' business; PostAll just waits.
func noProgress() int { return 0 }
