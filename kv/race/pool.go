package race

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The node's free memory, for subtables and block chunks: what was never
// handed out (from bump to the region's end) and what clients gave back
// (methodFree: a closing client's unused chunk space and free blocks).
// Given-back ranges wait out quarantineTime first, so that a GET that
// read a slot just before its block was freed still finds the block
// intact (its CRC and key check catch the rare reuse anyway); then they
// join the free extents, merged with their neighbours, and an extent
// that reaches bump moves bump back.

// quarantineTime is how long given-back memory waits before reuse.
const quarantineTime = 2 * graceTime

// held is given-back memory waiting out its quarantine.
type held struct {
	off, n uint64
	at     time.Time
}

// extents are free ranges of the region, by offset and by end, merged
// when they touch. Under Server.mu.
type extents struct {
	start map[uint64]uint64 // offset → length
	end   map[uint64]uint64 // offset+length → offset
	bytes uint64
}

func (e *extents) add(off, n uint64) {
	e.bytes += n
	if e.start == nil {
		e.start, e.end = map[uint64]uint64{}, map[uint64]uint64{}
	}
	if prev, ok := e.end[off]; ok { // a free range ends where this starts
		delete(e.end, off)
		off, n = prev, n+e.start[prev]
		delete(e.start, prev)
	}
	if m, ok := e.start[off+n]; ok { // one starts where this ends
		delete(e.start, off+n)
		delete(e.end, off+n+m)
		n += m
	}
	e.start[off], e.end[off+n] = n, off
}

// remove takes the range [off, off+n) out of the free range at off.
func (e *extents) remove(off, n uint64) {
	m := e.start[off]
	delete(e.start, off)
	delete(e.end, off+m)
	if m > n {
		e.start[off+n], e.end[off+m] = m-n, off+n
	}
	e.bytes -= n
}

// cut takes the range [off, off+n) out of the range that holds it, false
// when no range holds all of it.
func (e *extents) cut(off, n uint64) bool {
	for s, m := range e.start {
		if s <= off && off+n <= s+m {
			e.remove(s, m)
			if off > s {
				e.add(s, off-s)
			}
			if s+m > off+n {
				e.add(off+n, s+m-off-n)
			}
			return true
		}
	}
	return false
}

// fit is a free range of at least n bytes whose 64-byte aligned start
// leaves n bytes: its offset.
func (e *extents) fit(n uint64) (uint64, bool) {
	for off, m := range e.start {
		if off%64 == 0 && m >= n {
			return off, true
		}
	}
	return 0, false
}

// release moves the memory whose quarantine is over into the free
// extents, and the extent that ends at bump back into the never-used
// part. Under s.mu.
func (s *Server) release(now time.Time) {
	k := 0
	for ; k < len(s.held) && now.Sub(s.held[k].at) >= quarantineTime; k++ {
		s.ext.add(s.held[k].off, s.held[k].n)
	}
	s.held = s.held[k:]
	if off, ok := s.ext.end[s.bump]; ok {
		s.ext.remove(off, s.bump-off)
		s.bump = off
	}
}

// ErrNotHeld refuses a free of memory the node has not handed to the
// freeing client, or that it has given back already: taken twice into
// the pool, it would go to two clients at once.
var ErrNotHeld = errors.New("race: free of memory the client does not hold")

// owner is the memory a node handed to one client connection (by
// methodAlloc) and that it has not given back. Under Server.mu.
type owner struct{ held extents }

// freeRPC: (u64 address, u32 length) pairs → nothing. The ranges join
// the quarantine. Each must be memory the node handed to o and o has not
// given back yet; a request with any other range is refused whole.
func (s *Server) freeRPC(o *owner, req, resp []byte) (int, error) {
	if len(req)%12 != 0 {
		return 0, errors.New("race: free takes (u64 address, u32 length) pairs")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var taken []held // cut from o.held: put back if the request is refused
	refuse := func(err error) (int, error) {
		for _, h := range taken {
			o.held.add(h.off, h.n)
		}
		return 0, err
	}
	now := time.Now()
	for ; len(req) > 0; req = req[12:] {
		addr, n := binary.LittleEndian.Uint64(req), uint64(binary.LittleEndian.Uint32(req[8:]))
		off := addr - s.mr.Addr()
		if addr < s.mr.Addr() || off < s.heap || n == 0 || off+n > s.bump || off%blockUnit != 0 || n%blockUnit != 0 {
			return refuse(fmt.Errorf("race: free of %d bytes at %#x: not memory the node handed out", n, addr))
		}
		if !o.held.cut(off, n) {
			return refuse(fmt.Errorf("%w: %d bytes at %#x", ErrNotHeld, n, addr))
		}
		taken = append(taken, held{off: off, n: n, at: now})
	}
	s.held = append(s.held, taken...)
	s.frees += uint64(len(taken))
	return 0, nil
}
