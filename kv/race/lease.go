package race

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/verbs"
)

// Leases: what a client holds in the table — a subtable's split lock,
// the directory lock, a writer count — must not outlive it. Nothing on
// the node watches the clients, so the holders' peers decide, each on
// its own clock:
//
//   - A lock is a lease word: the holder's id and an epoch (leaseWord).
//     A split writes it next to the subtable's control word when it takes
//     the lock, and the directory lock is one. A live holder of a split
//     lock renews it (a new epoch) at least every quarter lease while it
//     works (beat).
//   - A client that finds a lock held with the same lease word for a
//     whole lease (Lease, 1 s by default) takes it over by CAS from that
//     word to its own, and finishes the split or rolls it back
//     (takeOver).
//   - Every change a split makes after locking runs CONDITIONAL on a
//     masked CAS that finds the holder's lease word still there (fenced,
//     dirFenced): a holder that was only slow, and was taken over,
//     changes nothing more, and learns it from its next request.
//   - A writer count is not a lock: a split waits one lease at most for
//     the writers inside to leave (drain), then goes on. Every slot CAS
//     of a writer is CONDITIONAL on the control word still showing the
//     lock clear and the depth it entered on (writeGuard), so a writer
//     that outlived that wait cannot change a subtable being split. The
//     dead writers' counts stay in the word, and each later split of
//     that subtable waits its lease once.
//
// What a lease cannot cover is a request list stopped at the node
// between its guard and the request after it for longer than a lease.

// leaseOff is where a subtable's lease word lives in its control bytes.
const leaseOff = 8

// errLease: the client no longer holds the lease its request was fenced
// by (another client took it over).
var errLease = errors.New("race: lease taken over")

// leaseWord is a lock's word: the holder's id and an epoch.
func leaseWord(id, epoch uint64) uint64 { return id<<24 | epoch&(1<<24-1) }

// word is the native-order word at the start of b.
func word(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }

// newLease is a lease word of the client's that no earlier lock used.
func (c *Client) newLease() uint64 { return leaseWord(c.id, c.epoch.Add(1)) }

// Test hooks: a test stops a client at one of these points to kill it
// there (export_test.go).
const (
	hookEntered        = "entered"         // a writer is inside a subtable
	hookSplitLocked    = "split-locked"    // a split holds a subtable's lock
	hookSplitDirLocked = "split-dirlocked" // and the directory lock
	hookSplitPublished = "split-published" // the directory points at both halves
)

// testHook, when set (by tests only, before clients start), is called at
// each hook point.
var testHook func(point string)

func (c *Client) hook(point string) {
	if h := testHook; h != nil {
		h(point)
	}
}

// beat renews the split's lease when a quarter of it has passed: a CAS
// from its lease word to the next epoch. errLease when another client
// took it over.
func (sp *splitter) beat() error {
	if time.Since(sp.beatAt) < sp.c.cfg.Lease/4 {
		return nil
	}
	next := sp.c.newLease()
	w := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: []verbs.SGE{sp.s.SGE(offCAS, 8)}, RemoteAddr: sp.sub + leaseOff, RKey: sp.c.rkey}
	w.Atomic.Compare[0], w.Atomic.Swap[0] = sp.lease, next
	if err := sp.one(w); err != nil {
		return err
	}
	if sp.word(offCAS) != sp.lease {
		return errLease
	}
	sp.lease, sp.beatAt = next, time.Now()
	return nil
}

// fenced runs w CONDITIONAL on the split's lease word being the
// client's: errLease when it is not (w did not run).
func (sp *splitter) fenced(w verbs.SendWR) error {
	if err := sp.beat(); err != nil {
		return err
	}
	sp.put(offTest, ^sp.lease)
	w.Flags |= verbs.FlagConditional | verbs.FlagSignaled
	ws := []verbs.SendWR{guardWR(sp.s, sp.c.rkey, sp.sub+leaseOff, ^uint64(0), sp.lease), w}
	if err := sp.c.do(sp.c.bg, sp.s, ws); err != nil {
		return err
	}
	if sp.word(offTest) != sp.lease {
		return errLease
	}
	return nil
}

// dirFenced runs w CONDITIONAL on both the split's lease and the
// directory lock being the client's.
func (sp *splitter) dirFenced(w verbs.SendWR) error {
	if err := sp.beat(); err != nil {
		return err
	}
	c := sp.c
	sp.put(offTest, ^sp.lease)
	sp.put(offTest2, ^sp.dir)
	g2 := guardWR(sp.s, c.rkey, c.base+8, ^uint64(0), sp.dir)
	g2.SGL = []verbs.SGE{sp.s.SGE(offTest2, 8)}
	g2.Flags |= verbs.FlagConditional
	w.Flags |= verbs.FlagConditional | verbs.FlagSignaled
	ws := []verbs.SendWR{guardWR(sp.s, c.rkey, sp.sub+leaseOff, ^uint64(0), sp.lease), g2, w}
	if err := c.do(c.bg, sp.s, ws); err != nil {
		return err
	}
	if sp.word(offTest) != sp.lease || sp.word(offTest2) != sp.dir {
		return errLease
	}
	return nil
}

// lockDir takes the directory lock: CAS a lease word of the client's into
// it, backing off while another client holds it, and taking it over from
// a holder whose word stayed the same for a lease (a split under it
// takes a few round trips).
func (sp *splitter) lockDir() error {
	c := sp.c
	mine := c.newLease()
	var seen uint64
	var since time.Time
	for wait := time.Microsecond; ; wait = min(2*wait, time.Millisecond) {
		w := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: []verbs.SGE{sp.s.SGE(offCAS, 8)}, RemoteAddr: c.base + 8, RKey: c.rkey}
		w.Atomic.Swap[0] = mine
		if seen != 0 && time.Since(since) >= c.cfg.Lease {
			w.Atomic.Compare[0] = seen // take it over
		}
		if err := sp.one(w); err != nil {
			return err
		}
		got := sp.word(offCAS)
		if got == w.Atomic.Compare[0] {
			if got != 0 {
				slog.Debug("race: took the directory lock over from a holder presumed dead", "word", got)
			}
			sp.dir = mine
			return nil
		}
		if got != seen {
			seen, since = got, time.Now()
		}
		if err := sp.beat(); err != nil {
			return err
		}
		time.Sleep(wait)
	}
}

// unlockDir releases the directory lock: a CAS from the client's word
// to 0 (a lock taken over is not the client's to release).
func (sp *splitter) unlockDir() error {
	w := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: []verbs.SGE{sp.s.SGE(offCAS, 8)}, RemoteAddr: sp.c.base + 8, RKey: sp.c.rkey}
	w.Atomic.Compare[0] = sp.dir
	if err := sp.one(w); err != nil {
		return err
	}
	held := sp.word(offCAS) == sp.dir
	sp.dir = 0
	if !held {
		return errLease
	}
	return nil
}

// sighting is a subtable's lease word as a client first saw it, locked.
type sighting struct {
	lease uint64
	at    time.Time
}

// expired is called by a writer that found subtable sub locked: it reads
// the lock's lease word and, when it has seen the same word for a whole
// lease, takes the split over.
func (c *Client) expired(ctx context.Context, sub uint64) error {
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return c.mapErr(err)
	}
	w := []verbs.SendWR{{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offCtl, 16)}, RemoteAddr: sub, RKey: c.rkey}}
	if err := c.do(ctx, s, w); err != nil {
		c.putBack(s, err)
		return c.mapErr(err)
	}
	ctl, lw := word(s.Buf[offCtl:]), word(s.Buf[offCAS:])
	c.ops.Release(s)
	now := time.Now()
	c.smu.Lock()
	seen, ok := c.seen[sub]
	switch {
	case ctl&ctlLock == 0:
		delete(c.seen, sub)
	case !ok || seen.lease != lw:
		c.seen[sub] = sighting{lease: lw, at: now}
	case now.Sub(seen.at) >= c.cfg.Lease:
		delete(c.seen, sub)
		c.smu.Unlock()
		return c.takeOver(ctx, sub, lw)
	}
	c.smu.Unlock()
	return nil
}

// takeOver takes the split lock of subtable sub from a holder presumed
// dead (its lease word lw unchanged for a lease): a CAS from lw to a
// lease word of the client's, while the lock is set. The new holder
// then finishes the split when the directory already points at both
// halves, or rolls it back (unlocks the subtable at its depth). Losing
// the CAS (the holder renewed, or another client took over) is no error.
func (c *Client) takeOver(ctx context.Context, sub, lw uint64) error {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return c.mapErr(err)
	}
	sp := splitter{c: c, s: s, sub: sub}
	mine := c.newLease()
	cas := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, Flags: verbs.FlagConditional, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: sub + leaseOff, RKey: c.rkey}
	cas.Atomic.Compare[0], cas.Atomic.Swap[0] = lw, mine
	sp.put(offCAS, ^lw)
	ws := []verbs.SendWR{guardWR(s, c.rkey, sub, ctlLock, ctlLock), cas,
		{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offCtl, 8)}, RemoteAddr: sub, RKey: c.rkey}}
	if err := c.do(c.bg, s, ws); err != nil {
		c.putBack(s, err)
		return c.mapErr(err)
	}
	if sp.word(offCAS) != lw {
		c.ops.Release(s)
		return nil
	}
	ctl := sp.word(offCtl) | ctlLock
	sp.ctl, sp.d, sp.suffix = ctl, ctlDepth(ctl), ctlSuffix(ctl)
	sp.lease, sp.beatAt = mine, time.Now()
	slog.Debug("race: took a split over from a holder presumed dead", "subtable", sub, "lease", lw)
	err = sp.recover()
	c.putBack(s, err)
	if errors.Is(err, errLease) {
		return nil
	}
	return c.mapErr(err)
}

// recover finishes or rolls back a split taken over. The directory says
// how far it got: the entry of the subtable's suffix (a key whose next
// bit is 0) has the next depth once the split was published, its only
// change to the table that others see. Published: the moved keys are
// cleared from the old subtable (classify again: keys whose bit d is 1)
// and it unlocks at the next depth. Not published: it unlocks at its
// depth, and a writer splits it again.
func (sp *splitter) recover() error {
	c := sp.c
	if err := sp.drain(); err != nil {
		return err
	}
	if err := sp.lockDir(); err != nil {
		return err
	}
	if err := sp.read(c.base+dirOff+8*sp.suffix, offEntry, 8); err != nil {
		return err
	}
	e := sp.word(offEntry)
	if err := sp.unlockDir(); err != nil {
		return err
	}
	if dirAddr(e) != sp.sub {
		return fmt.Errorf("%w: directory entry %d does not point at its subtable", kv.ErrUnreachable, sp.suffix)
	}
	if dirDepth(e) == sp.d {
		return sp.unlock(sp.d)
	}
	moved, err := sp.classify()
	if err != nil {
		return err
	}
	if err := sp.clearMoved(moved); err != nil {
		return err
	}
	if err := sp.unlock(sp.d + 1); err != nil {
		return err
	}
	// The new half stays locked by the dead holder's lease: unlock it.
	if err := sp.read(c.base+dirOff+8*(sp.suffix|1<<sp.d), offEntry, 8); err != nil {
		return err
	}
	nsub := dirAddr(sp.word(offEntry))
	if err := sp.read(nsub+leaseOff, offLease, 8); err != nil {
		return err
	}
	return unlockNew(c, sp.s, nsub, sp.word(offLease))
}

// unlockNew clears the lock of a split's new subtable nsub while its
// lease word is lease: CAS from the control word read, guarded by the
// lease (a lease taken over leaves the lock to its new holder; no
// error). Writers that found it locked are leaving: the count is kept.
func unlockNew(c *Client, s remote.Slot, nsub, lease uint64) error {
	if err := c.do(c.bg, s, []verbs.SendWR{{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offCtl, 8)}, RemoteAddr: nsub, RKey: c.rkey}}); err != nil {
		return err
	}
	cur := word(s.Buf[offCtl:])
	for cur&ctlLock != 0 {
		cas := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, Flags: verbs.FlagConditional | verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: nsub, RKey: c.rkey}
		cas.Atomic.Compare[0], cas.Atomic.Swap[0] = cur, cur&^ctlLock
		binary.NativeEndian.PutUint64(s.Buf[offCAS:], ^cur)
		binary.NativeEndian.PutUint64(s.Buf[offTest:], ^lease)
		if err := c.do(c.bg, s, []verbs.SendWR{guardWR(s, c.rkey, nsub+leaseOff, ^uint64(0), lease), cas}); err != nil {
			return err
		}
		if word(s.Buf[offTest:]) != lease {
			return nil
		}
		got := word(s.Buf[offCAS:])
		if got == cur {
			return nil
		}
		cur = got
	}
	return nil
}
