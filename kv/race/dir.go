package race

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/verbs"
)

// The client's cache of the node's directory: read whole at the start and
// after a split, and checked entry by entry when a GET misses.

// refresh reads the global depth and the directory into the cache.
func (c *Client) refresh(ctx context.Context) error {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.refreshLocked(ctx)
}

// refreshLocked is refresh under c.rmu. Its READs run under c.bg: the
// directory lands in c.dirMR, which a split uses next, so a READ must
// never be left in flight by a caller that gave up.
func (c *Client) refreshLocked(ctx context.Context) error {
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return c.mapErr(err)
	}
	rd := func(addr uint64, n int, dst verbs.SGE) error {
		dst.Length = uint32(n)
		w := []verbs.SendWR{{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{dst}, RemoteAddr: addr, RKey: c.rkey}}
		return c.do(c.bg, s, w)
	}
	if err := rd(c.base, 8, s.SGE(offDepth, 8)); err != nil {
		c.putBack(s, err)
		return c.mapErr(err)
	}
	d := uint(binary.NativeEndian.Uint64(s.Buf[offDepth:]))
	c.ops.Release(s)
	if d > MaxDepth {
		return fmt.Errorf("%w: global depth %d", kv.ErrUnreachable, d)
	}
	s, err = c.ops.Acquire(ctx)
	if err != nil {
		return c.mapErr(err)
	}
	dst := verbs.SGE{Addr: c.dirMR.Addr(), LKey: c.dirMR.LKey()}
	if err := rd(c.base+dirOff, 8<<d, dst); err != nil {
		c.putBack(s, err)
		return c.mapErr(err)
	}
	c.ops.Release(s)
	dir := make([]uint64, 1<<d)
	for i := range dir {
		dir[i] = binary.NativeEndian.Uint64(c.dirMR.Bytes()[8*i:])
	}
	c.dmu.Lock()
	c.depth, c.dir = d, dir
	c.dmu.Unlock()
	return nil
}

// entry is the cached directory entry for hash h.
func (c *Client) entry(h uint64) (uint, int, uint64) {
	c.dmu.RLock()
	defer c.dmu.RUnlock()
	i := int(h & (1<<c.depth - 1))
	return c.depth, i, c.dir[i]
}

// stale reports whether the node's directory entry i (under the cached
// depth d) or its global depth differ from the cache: a miss must then
// look again.
func (c *Client) stale(ctx context.Context, s remote.Slot, d uint, i int, e uint64) (bool, error) {
	w := []verbs.SendWR{
		{Opcode: verbs.OpRead, SGL: []verbs.SGE{s.SGE(offDepth, 8)}, RemoteAddr: c.base, RKey: c.rkey},
		{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offEntry, 8)}, RemoteAddr: c.base + dirOff + 8*uint64(i), RKey: c.rkey},
	}
	if err := c.do(ctx, s, w); err != nil {
		return false, err
	}
	return binary.NativeEndian.Uint64(s.Buf[offDepth:]) != uint64(d) || binary.NativeEndian.Uint64(s.Buf[offEntry:]) != e, nil
}
