package perf

import (
	"context"
	"time"
)

// Plan is a measurement matrix: every operation × test × size, each
// measured until Stop.
type Plan struct {
	Ops   []Op
	Tests []Test
	// Sizes are the message sizes; atomics are always measured at 8 bytes
	// only.
	Sizes []int
	Stop  Stop
}

// Cells lists the plan's cells in report order: by operation, then test,
// then size.
func (pl *Plan) Cells() []Cell {
	var cells []Cell
	for _, op := range pl.Ops {
		for _, t := range pl.Tests {
			sizes := pl.Sizes
			if op.Atomic() {
				sizes = []int{8}
			}
			for _, n := range sizes {
				cells = append(cells, Cell{Op: op, Test: t, Size: n})
			}
		}
	}
	return cells
}

// Estimate is how long the plan takes when it stops by duration (zero
// when it stops by iterations).
func (pl *Plan) Estimate() time.Duration {
	if pl.Stop.Iters > 0 {
		return 0
	}
	return time.Duration(len(pl.Cells())) * pl.Stop.Duration
}

// Run measures every cell of the plan in order, calling each (if not
// nil) after every cell, and returns the measurements.
func (p *Pair) Run(ctx context.Context, pl *Plan, each func(Measurement)) ([]Measurement, error) {
	cells := pl.Cells()
	out := make([]Measurement, 0, len(cells))
	for _, c := range cells {
		m, err := p.Measure(ctx, c, pl.Stop)
		if err != nil {
			return out, err
		}
		out = append(out, m)
		if each != nil {
			each(m)
		}
	}
	return out, nil
}
