package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
)

// JoinConfig says how a replica that restarted empty rejoins its volume
// (Config.Join): which volume, and how fast it copies it.
type JoinConfig struct {
	// Replicas is the volume's replica list: the connection manager
	// addresses of its replicas, this one included.
	Replicas []string
	// Self is this replica's address in Replicas.
	Self string
	// Token is the other replicas' auth token; empty when they have none.
	Token string
	// Window is how many blocks are copied at once (default 16): at most
	// that many one-sided READs and RPCs in flight per donor.
	Window int
	// Retry is the first pause between attempts when a majority of the
	// others cannot be reached (default 100 ms), doubled after every
	// failed attempt up to MaxRetry (default 5 s).
	Retry, MaxRetry time.Duration
	// DialTimeout bounds one attempt to reach another replica (default
	// 5 s).
	DialTimeout time.Duration

	// skipCopy makes the replica a member without copying anything: the
	// negative control of the tests (export_test.go), never otherwise.
	skipCopy bool
}

func (c *JoinConfig) defaults() {
	if c.Window <= 0 {
		c.Window = 16
	}
	if c.Retry <= 0 {
		c.Retry = 100 * time.Millisecond
	}
	if c.MaxRetry < c.Retry {
		c.MaxRetry = max(c.Retry, 5*time.Second)
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
}

// check reports whether c names a volume's replica list with Self in
// it.
func (c *JoinConfig) check() error {
	if err := blockstore.CheckReplicas(c.Replicas); err != nil {
		return err
	}
	if !slices.Contains(c.Replicas, c.Self) {
		return fmt.Errorf("%w: this replica, %q, is not in %v", blockstore.ErrReplicas, c.Self, c.Replicas)
	}
	if len(c.Replicas) == 1 {
		return fmt.Errorf("%w: a volume of one replica has nobody to copy from", blockstore.ErrReplicas)
	}
	return nil
}

// Recovering reports whether the replica is still copying its volume
// from the others (Config.Join), and so not a member.
func (r *Replica) Recovering() bool { return r.recovering.Load() }

// Joined closes once the replica is a member: at once without
// Config.Join, else when its copy is done.
func (r *Replica) Joined() <-chan struct{} { return r.joined }

// startJoin checks jc and starts the recovery in the background: the
// replica is not a member until it completes.
func (r *Replica) startJoin(jc JoinConfig) error {
	jc.defaults()
	jc.Replicas = slices.Clone(jc.Replicas) // the caller's may change
	if err := jc.check(); err != nil {
		return fmt.Errorf("replica: join: %w", err)
	}
	r.recovering.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	r.stopJoin, r.joinDone = cancel, make(chan struct{})
	go r.join(ctx, jc)
	return nil
}

// join recovers the replica: it retries, with a growing pause, until a
// copy from a majority of the others completes (then the replica is a
// member) or ctx ends (Close).
func (r *Replica) join(ctx context.Context, jc JoinConfig) {
	defer close(r.joinDone)
	others := slices.DeleteFunc(slices.Clone(jc.Replicas), func(a string) bool { return a == jc.Self })
	need := blockstore.Quorum(len(jc.Replicas)) // f+1 of the 2f others
	slog.Info("replica: recovering: copying the volume from the others before answering as a member",
		"self", jc.Self, "others", others, "need", need)
	wait := jc.Retry
	for attempt := 1; ; attempt++ {
		t0 := time.Now()
		blocks, err := r.recoverOnce(ctx, jc, others, need)
		if err == nil {
			r.recovering.Store(false)
			close(r.joined)
			slog.Info("replica: recovered: a member again", "self", jc.Self, "blocks", blocks, "took", time.Since(t0).Round(time.Millisecond))
			return
		}
		if ctx.Err() != nil {
			slog.Info("replica: recovery stopped", "self", jc.Self)
			return
		}
		slog.Warn("replica: recovery cannot complete yet; retrying", "self", jc.Self, "attempt", attempt,
			"retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			slog.Info("replica: recovery stopped", "self", jc.Self)
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, jc.MaxRetry)
	}
}

// recoverOnce is one attempt: reach the others, learn the layout from
// at least need of them, make the volume (recovering) if it is not
// here yet, and copy every block from every donor reached — at least
// need of them for every block, or the attempt fails. It returns the
// block count.
func (r *Replica) recoverOnce(ctx context.Context, jc JoinConfig, others []string, need int) (uint64, error) {
	donors, err := r.reachDonors(ctx, jc, others, need)
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, d := range donors {
			d.close()
		}
	}()
	l := donors[0].info.Layout
	v, err := r.recoveringVolume(l)
	if err != nil {
		return 0, err
	}
	if jc.skipCopy {
		return l.Blocks, nil
	}
	return l.Blocks, r.copyVolume(ctx, v, donors, need, jc.Window)
}

// recoveringVolume is the replica's volume of layout l, made now if it
// has none (an earlier attempt may have made it).
func (r *Replica) recoveringVolume(l blockstore.Layout) (*volume, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v := r.vol.Load(); v != nil {
		if !v.info.Layout.Equal(l) {
			return nil, fmt.Errorf("%w: this replica holds %d blocks of %d bytes, the others %d of %d", ErrExists,
				v.info.Layout.Blocks, v.info.Layout.BlockSize, l.Blocks, l.BlockSize)
		}
		return v, nil
	}
	v, err := newVolume(r.pd, l, r.cfg, &r.cpu)
	if err != nil {
		return nil, err
	}
	r.vol.Store(v)
	return v, nil
}

// copyVolume copies every block of v from the donors, window blocks at
// a time: each donor's ⟨tag, data⟩ of both designs' copies, and the
// largest tag of each installed here unless this replica holds a newer
// one. Every donor must answer for every block; it fails when fewer
// than need are left.
func (r *Replica) copyVolume(ctx context.Context, v *volume, donors []*donor, need, window int) error {
	l := v.info.Layout
	bs := l.BlockSize
	resp := make([]byte, 9)
	for first := uint64(0); first < l.Blocks; first += uint64(window) {
		k := int(min(uint64(window), l.Blocks-first))
		errs := make([]error, len(donors))
		done := make(chan int, len(donors))
		for i, d := range donors {
			go func() { errs[i] = d.fetch(ctx, first, k); done <- i }()
		}
		for range donors {
			<-done
		}
		live := donors[:0:0]
		for i, d := range donors {
			if errs[i] == nil {
				live = append(live, d)
			}
		}
		if len(live) < need {
			return fmt.Errorf("%w: %d of the other replicas answered for blocks %d to %d, %d needed: %w",
				blockstore.ErrNoQuorum, len(live), first, first+uint64(k)-1, need, errors.Join(errs...))
		}
		donors = live
		for j := range k {
			id := first + uint64(j)
			for design := range designs {
				var best Tag
				var data []byte
				for _, d := range live {
					if t, b := d.answer(design, j); t > best {
						best, data = t, b
					}
				}
				if best == 0 {
					continue // never written: the replica's block is zeros already
				}
				var err error
				if design == designPRISM {
					err = v.installSlot(id, best, data[:bs])
				} else {
					_, err = v.write(id, best, data[:bs], resp)
				}
				if err != nil {
					return fmt.Errorf("replica: installing block %d: %w", id, err)
				}
			}
		}
	}
	return nil
}
