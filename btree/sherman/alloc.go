package sherman

import (
	"fmt"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/verbs"
)

// allocNode hands out a fresh node. The client takes chunks of
// chunkNodes nodes from a memory node's chunk counter by one-sided
// FETCH_AND_ADD, trying the memory nodes in turn; nodes are never given
// back (a tree without merges frees none).
func (c *Client) allocNode(s *slot) (uint64, error) {
	c.amu.Lock()
	defer c.amu.Unlock()
	if c.anext < c.aend {
		c.anext++
		return mkPtr(c.amn, c.anext-1), nil
	}
	for range c.conns {
		mn := (c.amn + 1) % len(c.conns)
		c.amn = mn
		w := verbs.SendWR{Opcode: verbs.OpAtomicFetchAndAdd, SGL: []verbs.SGE{s.sge(offWord, 8)},
			RemoteAddr: c.conns[mn].Region.Addr + offChunk, RKey: c.rkey(mn)}
		w.Atomic.Swap[0] = 1
		s.list = append(s.list[:0], w)
		if err := c.ops.do(c.bg, s, mn, s.list); err != nil {
			return 0, err
		}
		k := u64(s.buf[offWord:])
		first := 1 + k*chunkNodes // node 0 is the first root
		if first+chunkNodes <= uint64(c.nnodes[mn]) {
			c.anext, c.aend = int(first)+1, int(first)+chunkNodes
			return mkPtr(mn, int(first)), nil
		}
	}
	return 0, fmt.Errorf("%w: no memory node has %d free nodes", btree.ErrFull, chunkNodes)
}
