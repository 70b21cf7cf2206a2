package check

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// KVKind is the kind of a key-value operation.
type KVKind uint8

// Kinds of key-value operations.
const (
	KVGet KVKind = iota
	KVPut
	KVDelete
)

// KVInput is an operation's call: its kind, key and (Put) value.
type KVInput struct {
	Kind  KVKind
	Key   string
	Value string
}

// KVOutput is a Get's answer: the value and whether there was one.
type KVOutput struct {
	Value string
	Found bool
}

// kvState is one key's value in the model.
type kvState struct {
	value   string
	present bool
}

// KVModel is the sequential specification of a key-value store,
// partitioned by key.
var KVModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(KVInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return kvState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(kvState), input.(KVInput)
		switch in.Kind {
		case KVGet:
			out := output.(KVOutput)
			return out.Found == s.present && (!out.Found || out.Value == s.value), s
		case KVPut:
			return true, kvState{value: in.Value, present: true}
		default:
			return true, kvState{}
		}
	},
	DescribeOperation: func(input, output any) string {
		in := input.(KVInput)
		switch in.Kind {
		case KVGet:
			out := output.(KVOutput)
			if !out.Found {
				return fmt.Sprintf("get(%q) → none", in.Key)
			}
			return fmt.Sprintf("get(%q) → %q", in.Key, out.Value)
		case KVPut:
			return fmt.Sprintf("put(%q, %q)", in.Key, in.Value)
		}
		return fmt.Sprintf("delete(%q)", in.Key)
	},
}

// KVHistory records concurrent key-value operations for KVModel. Safe for
// concurrent use.
type KVHistory struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

// NewKVHistory starts an empty history.
func NewKVHistory() *KVHistory { return &KVHistory{start: time.Now()} }

// Now is the history's clock, for an operation's call and return times.
func (h *KVHistory) Now() int64 { return int64(time.Since(h.start)) }

// Add records an operation of client that was called at call and
// returned at ret (both from Now). A Put or Delete whose outcome is
// unknown (it failed with a timeout, say: it may or may not have taken
// effect) is added with unknown, and counts as returning never. A failed
// Get must not be added.
func (h *KVHistory) Add(client int, in KVInput, out KVOutput, call, ret int64, unknown bool) {
	if unknown {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	h.mu.Unlock()
}

// Len is the number of operations recorded.
func (h *KVHistory) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Check reports whether the history is linearizable. Ok, Illegal or
// Unknown (the checker ran out of time); for an illegal history, info
// describes a partial linearization (porcupine.Visualize renders it).
func (h *KVHistory) Check(timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	return porcupine.CheckOperationsVerbose(KVModel, ops, timeout)
}
