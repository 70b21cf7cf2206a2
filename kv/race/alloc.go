package race

import (
	"cmp"
	"context"
	"encoding/binary"
	"slices"
	"time"
)

// Block memory: a client carves its blocks out of chunks the node hands
// out by RPC, and keeps freed blocks on free lists of its own, by size.

// freedBlock is a reachable block waiting out graceTime.
type freedBlock struct {
	addr  uint64
	units int
	at    time.Time
}

// chunkSize is how much block memory a client takes from the node at once.
const chunkSize = 1 << 20

// graceTime is how long a freed block waits before reuse, so that a GET
// that read its slot just before still finds the block intact (its CRC
// and key check catch the rare reuse anyway).
const graceTime = 100 * time.Millisecond

func (c *Client) allocBlock(ctx context.Context, n int) (uint64, error) {
	units := (n + blockUnit - 1) / blockUnit
	c.amu.Lock()
	now := time.Now()
	k := 0
	for ; k < len(c.grace) && now.Sub(c.grace[k].at) >= graceTime; k++ {
		f := c.grace[k]
		c.free[f.units] = append(c.free[f.units], f.addr)
	}
	c.grace = c.grace[k:]
	if l := c.free[units]; len(l) > 0 {
		a := l[len(l)-1]
		c.free[units] = l[:len(l)-1]
		c.amu.Unlock()
		return a, nil
	}
	size := uint64(units * blockUnit)
	for c.chunk+size > c.end {
		c.amu.Unlock()
		if err := c.refillChunk(ctx, size); err != nil {
			return 0, err
		}
		c.amu.Lock()
	}
	a := c.chunk
	c.chunk += size
	c.amu.Unlock()
	return a, nil
}

// refillTimeout bounds a chunk refill's RPC, which runs to its end
// whatever its caller's context does (refillChunk).
const refillTimeout = 10 * time.Second

// refillChunk gives the client a new chunk of at least size bytes unless
// another caller did meanwhile. One refill runs at a time: callers that
// found the chunk spent together each took a chunk and replaced the
// others', which were lost to the node until the client closed (a node
// sized for its keys ran out of memory under load). The RPC runs on a
// goroutine of its own, to its end: a caller whose context ends returns
// at once, and the chunk the node handed out is kept all the same (bound
// to the caller's context, a cancelled alloc lost a chunk the node had
// already given).
func (c *Client) refillChunk(ctx context.Context, size uint64) error {
	select {
	case c.refill <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.amu.Lock()
	done := c.chunk+size <= c.end
	c.amu.Unlock()
	if done {
		<-c.refill
		return nil
	}
	res := make(chan error, 1)
	go func() {
		defer func() { <-c.refill }()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refillTimeout)
		defer cancel()
		var req [4]byte
		var resp [8]byte
		binary.LittleEndian.PutUint32(req[:], uint32(max(chunkSize, size)))
		c.rpcs.Add(1)
		if _, err := c.rpc.Call(rctx, methodAlloc, req[:], resp[:]); err != nil {
			res <- c.mapErr(err)
			return
		}
		c.amu.Lock()
		if rest := c.end - c.chunk; c.end > c.chunk && rest >= blockUnit {
			// The spent chunk's tail is a free block of its own size.
			c.free[int(rest/blockUnit)] = append(c.free[int(rest/blockUnit)], c.chunk)
		}
		c.chunk = binary.LittleEndian.Uint64(resp[:])
		c.end = c.chunk + uint64(max(chunkSize, size))
		c.amu.Unlock()
		res <- nil
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// freeBlock returns a block to the client's free lists, after the grace
// time when it was reachable.
func (c *Client) freeBlock(addr uint64, n int, reachable bool) {
	units := (n + blockUnit - 1) / blockUnit
	if units >= maxUnits {
		return // size unknown from the slot alone: leave it
	}
	c.amu.Lock()
	if reachable {
		c.grace = append(c.grace, freedBlock{addr: addr, units: units, at: time.Now()})
	} else {
		c.free[units] = append(c.free[units], addr)
	}
	c.amu.Unlock()
}

// returnMemory gives the node back, as a client closes, what it holds of
// the node's memory and no slot points to: the rest of its current chunk
// and its free blocks (those still in their grace time too: the node
// holds given-back memory back as long). It runs only once no operation
// is under way (waiting at most half a second for them; after that the
// memory stays lost to the node) and closes the client to new ones.
// Memory of a client that dies without closing is lost to the node.
func (c *Client) returnMemory() {
	deadline := time.Now().Add(500 * time.Millisecond)
	for !c.life.TryLock() {
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	defer c.life.Unlock()
	if c.closed.Swap(true) || c.rpc == nil {
		return
	}
	c.amu.Lock()
	var rs []freeRange
	if c.end > c.chunk {
		rs = append(rs, freeRange{c.chunk, c.end - c.chunk})
	}
	c.chunk, c.end = 0, 0
	for units, l := range c.free {
		for _, a := range l {
			rs = append(rs, freeRange{a, uint64(units * blockUnit)})
		}
	}
	for _, f := range c.grace {
		rs = append(rs, freeRange{f.addr, uint64(f.units * blockUnit)})
	}
	c.free, c.grace = map[int][]uint64{}, nil
	c.amu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var req [4 * 12]byte // 4 ranges fit the smallest RPC message
	for rs = mergeRanges(rs); len(rs) > 0; {
		k := 0
		for ; k < 4 && len(rs) > 0; k, rs = k+1, rs[1:] {
			binary.LittleEndian.PutUint64(req[12*k:], rs[0].addr)
			binary.LittleEndian.PutUint32(req[12*k+8:], uint32(rs[0].n))
		}
		c.rpcs.Add(1)
		if _, err := c.rpc.Call(ctx, methodFree, req[:12*k], nil); err != nil {
			return
		}
	}
}

// freeRange is memory a client gives back.
type freeRange struct{ addr, n uint64 }

// mergeRanges sorts rs and merges the ranges that touch, each at most
// 4 GiB - 64 (a u32 length).
func mergeRanges(rs []freeRange) []freeRange {
	slices.SortFunc(rs, func(a, b freeRange) int { return cmp.Compare(a.addr, b.addr) })
	out := rs[:0]
	for _, r := range rs {
		if k := len(out) - 1; k >= 0 && out[k].addr+out[k].n == r.addr && out[k].n+r.n < 1<<32 {
			out[k].n += r.n
			continue
		}
		out = append(out, r)
	}
	return out
}
