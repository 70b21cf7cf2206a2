// Package seq is networked sequencers — a service handing out unique,
// gap-free 64-bit numbers — in the three designs of Kalia et al.'s
// guidelines, and a checker:
//
//   - FAA: every number is a one-sided FETCH_AND_ADD on a counter in the
//     server's memory; a request for n numbers is one FAA of n.
//   - RPC with batching: a call asks for n numbers and the server's CPU
//     takes them from its counter with one atomic add per call.
//   - Header-only (Spec-S0 style): a request is a SEND_WITH_IMM without
//     payload whose immediate is the client's guess of the high 32 bits of
//     the next number; the answer is a SEND_WITH_IMM without payload
//     carrying the low 32 bits, and a flag says whether the guess held (if
//     not, the client asks again with the corrected guess).
//
// Every Sequencer returns a block [first, first+n) of numbers.
package seq

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Sequencer hands out blocks of unique numbers.
type Sequencer interface {
	// Next returns the first of n consecutive numbers reserved for the
	// caller.
	Next(ctx context.Context, n int) (uint64, error)
}

// ErrGap is returned by Check when the numbers are not unique and
// gap-free.
var ErrGap = errors.New("seq: numbers are not unique and gap-free")

// Check verifies that blocks (each first number and length) together are
// exactly the numbers [start, start+total) — unique and gap-free — and
// returns start.
func Check(firsts []uint64, lens []int) (uint64, error) {
	if len(firsts) != len(lens) {
		return 0, fmt.Errorf("%w: %d blocks with %d lengths", ErrGap, len(firsts), len(lens))
	}
	if len(firsts) == 0 {
		return 0, nil
	}
	type block struct {
		first uint64
		n     int
	}
	bs := make([]block, len(firsts))
	for i := range firsts {
		bs[i] = block{firsts[i], lens[i]}
	}
	slices.SortFunc(bs, func(a, b block) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	next := bs[0].first
	for _, b := range bs {
		if b.n <= 0 {
			return 0, fmt.Errorf("%w: an empty block at %d", ErrGap, b.first)
		}
		if b.first != next {
			if b.first < next {
				return 0, fmt.Errorf("%w: %d handed out twice", ErrGap, b.first)
			}
			return 0, fmt.Errorf("%w: numbers %d…%d never handed out", ErrGap, next, b.first-1)
		}
		next += uint64(b.n)
	}
	return bs[0].first, nil
}
