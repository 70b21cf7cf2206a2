package abdrpc

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
)

// The phases' buffers in an op: phase 0 asks (MethodRead or
// MethodReadTag: u64 block), phase 1 writes (MethodWrite: u64 block |
// u64 tag | data, answered u64 previous tag | u8 installed).
const (
	askReq   = 8
	writeAck = 9
)

// newDataOp makes an op for the volume's Reads and Writes (the pool's
// New).
func (c *Client) newDataOp() any {
	bs := c.layout.BlockSize
	o := c.newOp(askReq, replica.BufHead+bs, 16+bs, writeAck)
	o.spare = true
	return o
}

// check reports whether an operation on block id (n bytes of data; n <
// 0 for a read) may run.
func (c *Client) check(id uint64, n int) error {
	if c.isClosed() {
		return blockstore.ErrClosed
	}
	return c.layout.CheckOp(id, n)
}

// Read implements blockstore.Store with ABD's read: ask every replica
// for the block's ⟨tag, data⟩ and take the newest of a majority's
// answers; unless that majority already holds it, write it back to a
// majority before returning it, so that no later read returns an older
// value.
func (c *Client) Read(ctx context.Context, id uint64, dst []byte) ([]byte, error) {
	if err := c.check(id, -1); err != nil {
		return dst, err
	}
	o := c.getOp()
	defer o.release()
	bs := c.layout.BlockSize
	binary.LittleEndian.PutUint64(o.req[0], id)
	var newest replica.Tag
	best, answers, atMax := -1, 0, 0
	var holders uint32 // the replicas that answered max
	err := o.run(ctx, &phase{num: 0, method: replica.MethodRead, reqLen: askReq, need: c.q,
		accept: func(rep int, b []byte) (bool, error) {
			if len(b) != replica.BufHead+bs {
				return false, fmt.Errorf("%w: a %d-byte read answer for %d-byte blocks", blockstore.ErrProtocol, len(b), bs)
			}
			switch t := replica.Tag(binary.LittleEndian.Uint64(b)); {
			case best < 0 || t > newest:
				newest, best, atMax, holders = t, rep, 1, 1<<rep
			case t == newest:
				atMax++
				holders |= 1 << rep
			}
			answers++
			return answers >= c.q, nil
		}})
	if err != nil {
		return dst, fmt.Errorf("abdrpc: read block %d: %w", id, err)
	}
	data := o.resp[0][best][replica.BufHead : replica.BufHead+bs]
	if atMax < c.q && !c.noWriteBack {
		if err := c.writePhase(ctx, o, id, newest, data, holders, atMax); err != nil {
			return dst, fmt.Errorf("abdrpc: read block %d: write-back of %v: %w", id, newest, err)
		}
	}
	return append(dst, data...), nil
}

// Write implements blockstore.Store with ABD's write: ask every
// replica for the block's tag, take the largest timestamp of a
// majority's answers, and write the data with tag ⟨timestamp+1, client
// id⟩ to a majority.
func (c *Client) Write(ctx context.Context, id uint64, data []byte) error {
	if err := c.check(id, len(data)); err != nil {
		return err
	}
	o := c.getOp()
	defer o.release()
	binary.LittleEndian.PutUint64(o.req[0], id)
	var ts uint32
	answers := 0
	err := o.run(ctx, &phase{num: 0, method: replica.MethodReadTag, reqLen: askReq, need: c.q,
		accept: func(_ int, b []byte) (bool, error) {
			if len(b) != 8 {
				return false, fmt.Errorf("%w: a %d-byte tag", blockstore.ErrProtocol, len(b))
			}
			ts = max(ts, replica.Tag(binary.LittleEndian.Uint64(b)).TS())
			answers++
			return answers >= c.q, nil
		}})
	if err != nil {
		return fmt.Errorf("abdrpc: write block %d: %w", id, err)
	}
	// Two writes of the block through this client at once read the same
	// latest timestamp: the Issuer gives them different tags (one tag on
	// two values would let replicas agree on the tag and not the data).
	tag, err := c.tags.Next(id, replica.MakeTag(ts, 0), c.id)
	if err != nil {
		return fmt.Errorf("abdrpc: write block %d: %w", id, err)
	}
	if err := c.writePhase(ctx, o, id, tag, data, 0, 0); err != nil {
		return fmt.Errorf("abdrpc: write block %d: %w", id, err)
	}
	return nil
}

// writePhase is ABD's second phase: MethodWrite of ⟨tag, data⟩ at every
// replica but the acked ones (they hold tag already), until a majority
// holds tag or a newer one.
func (c *Client) writePhase(ctx context.Context, o *op, id uint64, tag replica.Tag, data []byte, acked uint32, acks int) error {
	req := o.req[1]
	binary.LittleEndian.PutUint64(req, id)
	binary.LittleEndian.PutUint64(req[8:], uint64(tag))
	copy(req[16:], data)
	return o.run(ctx, &phase{num: 1, method: replica.MethodWrite, reqLen: len(req), skip: acked, need: c.q - acks,
		accept: func(_ int, b []byte) (bool, error) {
			if err := checkAck(b, tag); err != nil {
				return false, err
			}
			acks++
			return acks >= c.q, nil
		}})
}

// checkAck checks MethodWrite's answer to a write of tag: a replica
// installs a tag newer than the one it held, and only then.
func checkAck(b []byte, tag replica.Tag) error {
	if len(b) != writeAck || b[8] > 1 {
		return fmt.Errorf("%w: write answered %x", blockstore.ErrProtocol, b)
	}
	prev := replica.Tag(binary.LittleEndian.Uint64(b))
	if installed := b[8] == 1; installed != (tag > prev) {
		return fmt.Errorf("%w: a write of %v over %v answered installed=%v", blockstore.ErrProtocol, tag, prev, installed)
	}
	return nil
}
