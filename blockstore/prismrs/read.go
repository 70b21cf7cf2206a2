package prismrs

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/verbs"
)

// Read implements blockstore.Store. Phase 1 reads block id's buffer at
// every replica with one indirect READ through its slot and waits for a
// majority; the largest tag's data is the answer. Phase 2 writes it
// back to a majority — the same chain as a write's — unless the
// majority's answers all carry that tag already.
func (c *Client) Read(ctx context.Context, id uint64, dst []byte) ([]byte, error) {
	if err := c.layout.CheckOp(id, -1); err != nil {
		return dst, err
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return dst, blockstore.ErrClosed
	}
	bs := c.layout.BlockSize
	start := len(dst)
	dst = slices.Grow(dst, bs)[:start+bs]
	out := dst[start:]
	all := c.all()
	p, err := c.acquire(ctx, all, c.quorum)
	if err != nil {
		return dst[:start], err
	}
	var tags [blockstore.MaxReplicas]replica.Tag
	var answered uint32
	var best replica.Tag
	oks := 0
	err = c.run(ctx, p, func(r *rconn, s *slot) []verbs.SendWR {
		return prism.IndirectRead(s.wrs[:], 0, s.sge(offData, replica.BufHead+bs), r.info.RKey, r.info.SlotAddr(id), false)
	}, func(res result) bool {
		if res.err != nil {
			return false
		}
		t := replica.Tag(binary.LittleEndian.Uint64(res.s.buf[offData:]))
		tags[res.r.idx], answered = t, answered|1<<res.r.idx
		if oks == 0 || t > best {
			best = t
			copy(out, res.s.buf[offData+replica.BufHead:offData+replica.BufHead+bs])
		}
		oks++
		return oks >= c.quorum
	}, nil)
	if oks < c.quorum {
		return dst[:start], noQuorum(err, p.failed, oks, c.quorum)
	}
	var holders uint32
	for i := range c.reps {
		if answered&(1<<i) != 0 && tags[i] == best {
			holders |= 1 << i
		}
	}
	if holders == answered || c.noWriteBack {
		return dst, nil
	}
	need := c.quorum - bitCount(holders)
	if need <= 0 {
		return dst, nil // a majority holds it already
	}
	c.writeBacks.Add(1)
	if err := c.install(ctx, id, best, out, all&^holders, need); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// noQuorum is the error of a phase that got oks of the need answers it
// needed (err: why it stopped waiting, if it did; failed: the last list
// that failed).
func noQuorum(err, failed error, oks, need int) error {
	switch {
	case err != nil:
		return err
	case failed != nil:
		return fmt.Errorf("%w: %d of %d replicas answered: %w", blockstore.ErrNoQuorum, oks, need, failed)
	}
	return fmt.Errorf("%w: %d of %d replicas answered", blockstore.ErrNoQuorum, oks, need)
}

// bitCount counts the replicas of a set.
func bitCount(m uint32) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}
