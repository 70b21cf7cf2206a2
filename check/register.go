package check

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// RegisterInput is a read or write of one register of many (a block of
// a block store): its register and, for a write, the value written.
// Values are the test's names for what it wrote (0: the initial value).
type RegisterInput struct {
	Write    bool
	Register uint64
	Value    uint64
}

// RegisterOutput is a read's answer.
type RegisterOutput struct {
	Value uint64
}

// RegisterModel is the sequential specification of an array of
// read/write registers, each starting at 0, partitioned by register.
var RegisterModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[uint64][]porcupine.Operation{}
		for _, op := range h {
			r := op.Input.(RegisterInput).Register
			by[r] = append(by[r], op)
		}
		regs := make([]uint64, 0, len(by))
		for r := range by {
			regs = append(regs, r)
		}
		slices.Sort(regs)
		out := make([][]porcupine.Operation, 0, len(regs))
		for _, r := range regs {
			out = append(out, by[r])
		}
		return out
	},
	Init: func() any { return uint64(0) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(RegisterInput)
		if in.Write {
			return true, in.Value
		}
		return output.(RegisterOutput).Value == state.(uint64), state
	},
	Equal: func(a, b any) bool { return a.(uint64) == b.(uint64) },
	DescribeOperation: func(input, output any) string {
		in := input.(RegisterInput)
		if in.Write {
			return fmt.Sprintf("write(%d, %d)", in.Register, in.Value)
		}
		return fmt.Sprintf("read(%d) → %d", in.Register, output.(RegisterOutput).Value)
	},
}

// RegisterHistory records concurrent register operations for
// RegisterModel. Safe for concurrent use.
type RegisterHistory struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

// NewRegisterHistory starts an empty history.
func NewRegisterHistory() *RegisterHistory { return &RegisterHistory{start: time.Now()} }

// Now is the history's clock, for an operation's call and return times.
func (h *RegisterHistory) Now() int64 { return int64(time.Since(h.start)) }

// Add records an operation of client called at call and returned at ret
// (both from Now). A write whose outcome is unknown (it failed: it may
// or may not have taken effect) is added with unknown, and counts as
// returning never. A failed read must not be added.
func (h *RegisterHistory) Add(client int, in RegisterInput, out RegisterOutput, call, ret int64, unknown bool) {
	if unknown {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	h.mu.Unlock()
}

// Len is the number of operations recorded.
func (h *RegisterHistory) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Check reports whether the history is linearizable: Ok, Illegal or
// Unknown (the checker ran out of time); for an illegal history, info
// describes a partial linearization (porcupine.Visualize renders it).
func (h *RegisterHistory) Check(timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	return porcupine.CheckOperationsVerbose(RegisterModel, ops, timeout)
}
