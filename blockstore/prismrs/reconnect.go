package prismrs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
)

// Backoff between a client's attempts to reach a replica again.
const (
	redialMin = 10 * time.Millisecond
	redialMax = time.Second
)

// reconnect replaces replica i's failed connection old (nil: it had
// none) in the background: it closes old, then dials the replica until
// it answers as a member of the volume — the same layout, this client's
// id granted — with a growing pause between attempts, and puts the new
// connection in place. It stops when the client closes.
func (c *Client) reconnect(i int, old *rconn) {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.stopped {
		return // Close closes old
	}
	c.wg.Go(func() {
		if old != nil {
			old.close()
		}
		wait := redialMin
		for {
			select {
			case <-c.stop:
				return
			case <-time.After(wait):
			}
			r, err := c.rejoin(i)
			if err == nil {
				if old != nil && old.info.RKey == r.info.RKey && old.info.Slots == r.info.Slots {
					// The same region: the buffers the old connection
					// had not returned yet are the replica's still.
					for _, b := range old.takeReturns() {
						r.giveBack(b.Addr)
					}
				}
				c.reps[i].CompareAndSwap(old, r)
				c.signal()
				return
			}
			slog.Debug("prismrs: replica not back yet", "replica", c.cfg.Replicas[i], "err", err)
			wait = min(2*wait, redialMax)
		}
	})
}

// rejoin dials replica i and checks that it holds the client's volume.
func (c *Client) rejoin(i int) (*rconn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	r, err := c.dial(ctx, i, c.cfg.Replicas[i])
	if err != nil {
		return nil, err
	}
	in, err := c.member(ctx, r)
	if err == nil {
		err = r.start(in, c.cfg.Slots)
	}
	if err == nil {
		// Taken: most likely by this client's connection that failed,
		// which the replica has not seen gone yet. Nobody else can hold
		// it: a majority granted it to this client.
		_, err = r.call(ctx, replica.MethodClaim, binary.LittleEndian.AppendUint32(nil, c.id))
		if errors.Is(err, replica.ErrIDTaken) {
			err = nil
		}
	}
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// member asks replica r for the volume and checks it is the client's.
func (c *Client) member(ctx context.Context, r *rconn) (replica.Info, error) {
	b, err := r.call(ctx, replica.MethodInfo, nil)
	if err != nil {
		return replica.Info{}, err
	}
	in, err := replica.UnmarshalInfo(b)
	if err != nil {
		return replica.Info{}, err
	}
	if l := in.Layout; l.BlockSize != c.layout.BlockSize || l.Blocks != c.layout.Blocks || !blockstore.SameReplicas(l.Replicas, c.layout.Replicas) {
		return replica.Info{}, fmt.Errorf("%w: replica %s holds another volume", blockstore.ErrNoVolume, r.addr)
	}
	return in, nil
}
