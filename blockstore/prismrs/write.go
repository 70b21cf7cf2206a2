package prismrs

import (
	"context"
	"encoding/binary"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/verbs"
)

// Write implements blockstore.Store. Phase 1 reads block id's tag at
// every replica (one READ of the slot's tag word) and waits for a
// majority; the new tag is ⟨largest timestamp + 1, this client's id⟩.
// Phase 2 installs ⟨tag | data⟩ at every replica with one chain each
// (install) and returns once a majority has acknowledged.
func (c *Client) Write(ctx context.Context, id uint64, data []byte) error {
	if err := c.layout.CheckOp(id, len(data)); err != nil {
		return err
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return blockstore.ErrClosed
	}
	tag, err := c.nextTag(ctx, id)
	if err != nil {
		return err
	}
	return c.install(ctx, id, tag, data, c.all(), c.quorum)
}

// nextTag is phase 1 of a write: the tag that follows the latest a
// majority holds for block id, with this client's id.
func (c *Client) nextTag(ctx context.Context, id uint64) (replica.Tag, error) {
	p, err := c.acquire(ctx, c.all(), c.quorum)
	if err != nil {
		return 0, err
	}
	var latest replica.Tag
	oks := 0
	err = c.run(ctx, p, func(r *rconn, s *slot) []verbs.SendWR {
		s.sgl[0] = s.sge(offCAS, 8)
		w := &s.wrs[0]
		*w = verbs.SendWR{Opcode: verbs.OpRead, RemoteAddr: r.info.SlotAddr(id) + 8, RKey: r.info.RKey, SGL: s.sgl[0:1]}
		return s.wrs[:1]
	}, func(res result) bool {
		if res.err != nil {
			return false
		}
		latest = max(latest, replica.Tag(binary.NativeEndian.Uint64(res.s.buf[offCAS:])))
		oks++
		return oks >= c.quorum
	}, nil)
	if oks < c.quorum {
		return 0, noQuorum(err, p.failed, oks, c.quorum)
	}
	return c.tags.Next(id, latest, c.id)
}

// install is phase 2 of a write, and a read's write-back: at every
// replica of targets one chain — ALLOCATE a buffer holding ⟨tag | data⟩,
// its address redirected to the scratch area; WRITE the tag next to it;
// a CONDITIONAL 16-byte CAS that swaps in ⟨address, tag⟩ from the scratch
// area if the slot's tag is smaller; READ the address back — until need
// replicas have acknowledged. A CAS that finds a newer tag is an ack too:
// the replica holds a tag at least as new. The buffer a CAS replaced,
// or the one it did not install, goes back to the replica.
func (c *Client) install(ctx context.Context, id uint64, tag replica.Tag, data []byte, targets uint32, need int) error {
	p, err := c.acquire(ctx, targets, need)
	if err != nil {
		return err
	}
	acks := 0
	err = c.run(ctx, p, func(r *rconn, s *slot) []verbs.SendWR {
		return chain(r, s, id, tag, data)
	}, func(res result) bool {
		if res.err != nil {
			return false
		}
		settle(res.r, res.s, tag)
		acks++
		return acks >= need
	}, func(res result) {
		if res.err == nil {
			settle(res.r, res.s, tag)
		}
	})
	if acks < need {
		return noQuorum(err, p.failed, acks, need)
	}
	return nil
}

// chain fills slot s's list of install's chain at replica r.
func chain(r *rconn, s *slot, id uint64, tag replica.Tag, data []byte) []verbs.SendWR {
	binary.LittleEndian.PutUint64(s.buf[offData:], uint64(tag))
	copy(s.buf[offData+replica.BufHead:], data)
	binary.NativeEndian.PutUint64(s.buf[offTag:], uint64(tag))
	// What a CAS that did not run leaves reads as "not installed", and
	// no buffer allocated.
	binary.NativeEndian.PutUint64(s.buf[offCAS+8:], ^uint64(0))
	binary.NativeEndian.PutUint64(s.buf[offAlloc:], 0)
	all := ^uint64(0)
	s.sgl[0] = s.sge(offData, replica.BufHead+len(data))
	s.sgl[1] = s.sge(offTag, 8)
	s.sgl[2] = s.sge(offCAS, 16)
	s.sgl[3] = s.sge(offAlloc, 8)
	w := s.wrs[:4]
	w[0] = verbs.SendWR{Opcode: verbs.OpAllocate, Flags: verbs.FlagRedirect, RKey: r.info.RKey, Queue: r.info.Queue,
		RedirectAddr: verbs.ScratchAddr(scratchPtr), SGL: s.sgl[0:1]}
	w[1] = verbs.SendWR{Opcode: verbs.OpWrite, Flags: verbs.FlagInline, RemoteAddr: verbs.ScratchAddr(scratchTag), SGL: s.sgl[1:2]}
	w[2] = verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, Flags: verbs.FlagConditional | verbs.FlagIndirectArg,
		RemoteAddr: r.info.SlotAddr(id), RKey: r.info.RKey, ArgAddr: verbs.ScratchAddr(scratchPtr), SGL: s.sgl[2:3],
		Atomic: verbs.AtomicArgs{Size: 16, Op: verbs.CmpLess, Compare: [4]uint64{0, uint64(tag)},
			CompareMask: [4]uint64{0, all}, SwapMask: [4]uint64{all, all}}}
	w[3] = verbs.SendWR{Opcode: verbs.OpRead, RemoteAddr: verbs.ScratchAddr(scratchPtr), SGL: s.sgl[3:4]}
	return w
}

// settle gives back, after install's chain at r answered, the buffer no
// slot points to: the one the CAS replaced, or the one it did not
// install.
func settle(r *rconn, s *slot, tag replica.Tag) {
	oldPtr := binary.NativeEndian.Uint64(s.buf[offCAS:])
	oldTag := replica.Tag(binary.NativeEndian.Uint64(s.buf[offCAS+8:]))
	if oldTag < tag {
		r.giveBack(oldPtr)
	} else {
		r.giveBack(binary.NativeEndian.Uint64(s.buf[offAlloc:]))
	}
}
