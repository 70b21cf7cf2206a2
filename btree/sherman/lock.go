package sherman

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// The lock hierarchy. Every node has a global lock word in its memory
// node's lock area (offLocks + 8·index): 0 when free, else the holder's
// lease word (client id · epoch). A client process keeps a local lock
// table in front of it: its tasks that want the same node queue on the
// node's local lock, and a task done with the node hands the global
// lock to the next one in the queue — no remote round trip — at most
// maxHandOver times in a row, then releases it so that other processes
// get their turn. The queue is a sync.Mutex (Sherman's is a ticket
// lock): Go's mutex serves waiters in order once one has waited 1 ms.

// maxHandOver bounds the hand-overs of a global lock inside a process.
const maxHandOver = 8

// errLease: the client no longer holds the lock its writes were guarded
// by (another client presumed it dead and took it over); nothing of the
// guarded writes happened.
var errLease = errors.New("sherman: lock taken over")

// localLock is a node's entry in the local lock table.
type localLock struct {
	refs    int // table references, under the table's mutex
	mu      sync.Mutex
	waiters atomic.Int32
	held    bool   // the process holds the global lock (under mu)
	word    uint64 // its lease word (under mu)
	handed  int    // hand-overs in a row (under mu)
}

// lockTable is a client's local lock table.
type lockTable struct {
	mu sync.Mutex
	m  map[uint64]*localLock
}

func (t *lockTable) get(p uint64) *localLock {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.m[p]
	if l == nil {
		l = &localLock{}
		t.m[p] = l
	}
	l.refs++
	return l
}

func (t *lockTable) put(p uint64, l *localLock) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(t.m, p)
	}
}

// held is a node locked by this task: its local lock, taken, and the
// global lock, held by the process.
type held struct {
	p uint64
	l *localLock
}

// lock takes node p's local lock, then its global lock unless the task
// before it handed it over.
func (c *Client) lock(ctx context.Context, s *slot, p uint64) (held, error) {
	l := c.locks.get(p)
	l.waiters.Add(1)
	l.mu.Lock()
	l.waiters.Add(-1)
	if l.held {
		c.handOvers.Add(1)
		return held{p, l}, nil
	}
	w, err := c.lockGlobal(ctx, s, p)
	if err != nil {
		l.mu.Unlock()
		c.locks.put(p, l)
		return held{}, err
	}
	l.held, l.word, l.handed = true, w, 0
	return held{p, l}, nil
}

// lockGlobal takes p's global lock by masked CAS from 0 to a new lease
// word. A word that stays the same for a whole lease belongs to a dead
// (or hopelessly slow) holder: it is taken over by CAS from that word.
func (c *Client) lockGlobal(ctx context.Context, s *slot, p uint64) (uint64, error) {
	mine := c.newLease()
	mn, addr := c.lockAddr(p)
	var seen uint64
	var since time.Time
	for try := 0; ; try++ {
		old, err := c.casWord(s, mn, addr, 0, mine)
		if err != nil {
			return 0, err
		}
		if old == 0 {
			return mine, nil
		}
		now := time.Now()
		switch {
		case old != seen:
			seen, since = old, now
		case now.Sub(since) >= c.cfg.Lease:
			got, err := c.casWord(s, mn, addr, old, mine)
			if err != nil {
				return 0, err
			}
			if got == old {
				c.takeOvers.Add(1)
				return mine, nil
			}
		}
		if err := c.ops.conflict(ctx, s, try); err != nil {
			return 0, err
		}
	}
}

// pause waits before the try+1st attempt: yields first, then sleeps
// growing to 1 ms (no busy loop on a shared machine).
func pause(ctx context.Context, try int) error {
	if try < 4 {
		runtime.Gosched()
		return ctx.Err()
	}
	d := time.Duration(1<<min(try-4, 10)) * time.Microsecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// casWord CASes the word at addr on memory node mn from old to new with
// a masked CAS and returns the word it found.
func (c *Client) casWord(s *slot, mn int, addr, old, new uint64) (uint64, error) {
	w := maskedCAS(s, offWord, c.rkey(mn), addr, old, new, ^uint64(0))
	if err := c.ops.do(c.bg, s, mn, []verbs.SendWR{w}); err != nil {
		return 0, err
	}
	return u64(s.buf[offWord:]), nil
}

// maskedCAS is a masked CAS of the word at addr from want to new under
// swapMask (0: a guard that changes nothing), its result at the slot's
// offset off.
func maskedCAS(s *slot, off int, rkey uint32, addr, want, new, swapMask uint64) verbs.SendWR {
	return verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, SGL: []verbs.SGE{s.sge(off, 8)}, RemoteAddr: addr, RKey: rkey,
		Atomic: verbs.AtomicArgs{Size: 8, Op: verbs.CmpEqual, Compare: [4]uint64{want}, CompareMask: [4]uint64{^uint64(0)},
			Swap: [4]uint64{new}, SwapMask: [4]uint64{swapMask}}}
}

// unlock writes back writes (on p's memory node) and lets the lock go,
// in one post list (command combination: RC keeps them in order): a
// guard that finds the lease word still the process's, the writes
// CONDITIONAL on it, and the CAS that frees the global lock — unless a
// task of the process waits for the node and the hand-over bound is not
// reached, when the global lock passes to it. errLease when the guard
// failed (the writes did not happen).
func (c *Client) unlock(s *slot, h held, writes []verbs.SendWR) error {
	defer c.locks.put(h.p, h.l)
	defer h.l.mu.Unlock()
	l := h.l
	mn, addr := c.lockAddr(h.p)
	keep := l.waiters.Load() > 0 && l.handed < maxHandOver
	if keep {
		l.handed++
	}
	list := s.list[:0]
	if len(writes) > 0 {
		list = append(list, maskedCAS(s, offGuard, c.rkey(mn), addr, l.word, 0, 0))
		for _, w := range writes {
			w.Flags |= verbs.FlagConditional
			list = append(list, w)
		}
	}
	if !keep {
		list = append(list, maskedCAS(s, offWord, c.rkey(mn), addr, l.word, 0, ^uint64(0)))
		l.held = false
	}
	if len(list) == 0 {
		return nil
	}
	put64(s.buf[offGuard:], l.word) // a list without a guard passes
	if err := c.ops.do(c.bg, s, mn, list); err != nil {
		l.held = false
		return err
	}
	if u64(s.buf[offGuard:]) != l.word {
		l.held = false
		return errLease
	}
	return nil
}
