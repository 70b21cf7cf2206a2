package abdrpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
)

// Dial connects a client to the volume on cfg.Replicas: it dials every
// replica (at most a minority may be unreachable; they are re-dialed in
// the background), learns the volume's layout from a majority that
// agrees on it (blockstore.ErrNoVolume when none does), and claims a
// client id at the replicas. ctx bounds all of it.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	c, err := open(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.setup(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("abdrpc: dial: %w", err)
	}
	return c, nil
}

// setup is Dial's work on an open client.
func (c *Client) setup(ctx context.Context) error {
	if err := c.connectAll(ctx, c.dialInfo, false, false); err != nil {
		return err
	}
	l, err := c.learnLayout(ctx)
	c.dropAll()
	if err != nil {
		return err
	}
	c.layout = l
	c.msg = max(replica.MaxMessage(l.BlockSize), infoMessage)
	c.ops.New = c.newDataOp
	if err := c.connectAll(ctx, c.connect, true, false); err != nil {
		return err
	}
	if err := c.claim(ctx); err != nil {
		return err
	}
	c.ready.Store(true)
	for _, m := range c.reps {
		if m.link.Load() == nil {
			c.spawn(func() { c.redial(m) })
		}
	}
	return nil
}

// dialInfo dials a connection for the setup calls only.
func (c *Client) dialInfo(ctx context.Context, m *member) (*link, error) {
	return c.dial(ctx, m.addr, infoMessage)
}

// connectAll connects to every replica at once with connect; a
// majority must succeed. The others get a grace period (twice what the
// majority took, at least connectGrace) and are then given up: a paused
// replica must not hold up Dial, and once it is ready the client
// re-dials them in the background. watch installs the connections as
// the data path's (watched, re-dialed when they fail). waitAll waits
// for every replica instead (within ctx).
func (c *Client) connectAll(ctx context.Context, connect func(context.Context, *member) (*link, error), watch, waitAll bool) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		m   *member
		l   *link
		err error
	}
	res := make(chan result, len(c.reps))
	for _, m := range c.reps {
		go func() {
			l, err := connect(cctx, m)
			res <- result{m, l, err}
		}()
	}
	start := time.Now()
	var errs []error
	up := 0
	var grace <-chan time.Time
	for range c.reps {
		var r result
		select {
		case r = <-res:
		case <-grace:
			cancel()
			r = <-res
		}
		if r.err != nil {
			errs = append(errs, fmt.Errorf("replica %s: %w", r.m.addr, r.err))
			continue
		}
		if up++; up == c.q && !waitAll {
			grace = time.After(max(connectGrace, 2*time.Since(start)))
		}
		if watch {
			c.install(r.m, r.l)
		} else {
			r.m.link.Store(r.l)
		}
	}
	if up < c.q {
		return fmt.Errorf("%w: %d of %d replicas reachable: %w", blockstore.ErrNoQuorum, up, len(c.reps), errors.Join(errs...))
	}
	if len(errs) > 0 {
		c.log.Warn("abdrpc: replicas unreachable", "err", errors.Join(errs...))
	}
	return nil
}

// connectGrace is the least a replica slower than a majority is waited
// for when connecting.
const connectGrace = 20 * time.Millisecond

// dropAll closes every connection (the setup connections).
func (c *Client) dropAll() {
	for _, m := range c.reps {
		if l := m.link.Swap(nil); l != nil {
			l.close()
		}
	}
}

// learnLayout asks every replica for its volume: a majority must hold
// the same one, whose replicas are the ones the client was given (in
// any order).
func (c *Client) learnLayout(ctx context.Context) (blockstore.Layout, error) {
	o := c.newOp(0, replica.MaxInfo, 0, 0)
	defer o.release()
	seen := map[string]int{}
	var found blockstore.Layout
	err := o.run(ctx, &phase{num: 0, method: replica.MethodInfo, need: c.q, noWait: true,
		accept: func(_ int, b []byte) (bool, error) {
			in, err := replica.UnmarshalInfo(b)
			if err != nil {
				return false, err
			}
			if !blockstore.SameReplicas(in.Layout.Replicas, c.cfg.Replicas) {
				return false, fmt.Errorf("%w: the replica holds a volume of replicas %v", blockstore.ErrNoVolume, in.Layout.Replicas)
			}
			k, err := replica.MarshalLayout(in.Layout)
			if err != nil {
				return false, fmt.Errorf("%w: %w", blockstore.ErrProtocol, err)
			}
			if seen[string(k)]++; seen[string(k)] < c.q {
				return false, nil
			}
			found = in.Layout
			return true, nil
		}})
	if err != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("%w: no majority of the replicas holds one volume: %w", blockstore.ErrNoVolume, err)
		}
		return blockstore.Layout{}, err
	}
	return found, nil
}

// claim picks a random client id and claims it at every replica
// connected: it is the client's when a majority grants it and none
// refuses it (a live client holds it there); else the client tries
// another. It waits for every replica's answer: the replicas connected
// answer at once, and one that stalls fails with its connection.
func (c *Client) claim(ctx context.Context) error {
	var err error
	for range claimAttempts {
		id := rand.Uint32()
		if id == 0 {
			continue
		}
		o := c.newOp(4, 1, 0, 0)
		binary.LittleEndian.PutUint32(o.req[0], id)
		grants := 0
		err = o.run(ctx, &phase{num: 0, method: replica.MethodClaim, reqLen: 4, need: c.q, noWait: true,
			accept: func(_ int, b []byte) (bool, error) {
				if err := checkGrant(b); err != nil {
					return false, err
				}
				grants++
				return false, nil // done once every replica answered
			},
			refuse: func(err error) bool { return errors.Is(err, replica.ErrIDTaken) }})
		o.release()
		switch {
		case errors.Is(err, replica.ErrIDTaken):
			continue
		case grants >= c.q:
			c.id = id
			return nil
		}
		return fmt.Errorf("claiming a client id: %w", err)
	}
	return fmt.Errorf("no free client id in %d tries: %w", claimAttempts, err)
}

// Create makes the volume of layout l on the replicas cfg names
// (l.Replicas, when empty, is cfg.Replicas): every replica reachable is
// asked, and a majority must create it (or hold it already, same
// layout). Creating an existing volume again with its layout succeeds;
// another layout fails with replica.ErrExists. Clients then Dial it.
func Create(ctx context.Context, cfg Config, l blockstore.Layout) error {
	if len(l.Replicas) == 0 {
		l.Replicas = cfg.Replicas
	}
	if err := l.Check(); err != nil {
		return fmt.Errorf("abdrpc: create: %w", err)
	}
	req, err := replica.MarshalLayout(l)
	if err != nil {
		return fmt.Errorf("abdrpc: create: %w", err)
	}
	c, err := open(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.connectAll(ctx, c.dialInfo, false, true); err != nil {
		return fmt.Errorf("abdrpc: create: %w", err)
	}
	o := c.newOp(len(req), replica.MaxInfo, 0, 0)
	defer o.release()
	copy(o.req[0], req)
	made := 0
	// Done only once every replica has answered: a majority suffices, but
	// a replica left without the volume would refuse every client.
	err = o.run(ctx, &phase{num: 0, method: replica.MethodCreate, reqLen: len(req), need: c.q, noWait: true,
		accept: func(_ int, b []byte) (bool, error) {
			in, err := replica.UnmarshalInfo(b)
			if err != nil {
				return false, err
			}
			if !in.Layout.Equal(l) {
				return false, fmt.Errorf("%w: created %d blocks of %d bytes", blockstore.ErrProtocol, in.Layout.Blocks, in.Layout.BlockSize)
			}
			made++
			return made == len(c.reps), nil
		}})
	if made >= c.q {
		if err != nil {
			c.log.Warn("abdrpc: volume created on a majority only", "made", made, "replicas", len(c.reps), "err", err)
		}
		return nil
	}
	return fmt.Errorf("abdrpc: create: %w", err)
}
