package race

import (
	"context"
	"encoding/binary"
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
	if c.chunk+size > c.end {
		c.amu.Unlock()
		var req [4]byte
		var resp [8]byte
		binary.LittleEndian.PutUint32(req[:], uint32(max(chunkSize, size)))
		c.rpcs.Add(1)
		if _, err := c.rpc.Call(ctx, methodAlloc, req[:], resp[:]); err != nil {
			return 0, c.mapErr(err)
		}
		c.amu.Lock()
		c.chunk = binary.LittleEndian.Uint64(resp[:])
		c.end = c.chunk + uint64(max(chunkSize, size))
	}
	a := c.chunk
	c.chunk += size
	c.amu.Unlock()
	return a, nil
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
