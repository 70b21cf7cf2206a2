package check

import (
	"sync"

	"github.com/rdmakit/rdmakit/txn"
)

// History records committed transactions' traces from many goroutines
// for Serializable. Its Add has the signature of workload.TxnRun.Trace
// and workload.TxnLoad.Trace.
type History struct {
	mu    sync.Mutex
	txns  []Txn
	chunk []txn.Access // the free end of the current chunk
}

// historyChunk is the accesses one allocation holds.
const historyChunk = 1 << 14

// NewHistory returns an empty history.
func NewHistory() *History { return &History{} }

// Add records a committed transaction's reads and writes: it is the
// history's next transaction (the first Add is T0). It copies the slices
// (not the key strings, which are immutable); it is safe for concurrent
// use.
func (h *History) Add(reads, writes []txn.Access) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := Txn{Reads: h.keep(reads), Writes: h.keep(writes)}
	h.txns = append(h.txns, t)
}

// keep copies a into the history's chunks (several traces share one
// allocation, so a million transactions are not millions of them).
func (h *History) keep(a []txn.Access) []txn.Access {
	if len(a) == 0 {
		return nil
	}
	if len(a) > len(h.chunk) {
		h.chunk = make([]txn.Access, max(historyChunk, len(a)))
	}
	out := h.chunk[:len(a):len(a)]
	copy(out, a)
	h.chunk = h.chunk[len(a):]
	return out
}

// Len returns the number of transactions recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.txns)
}

// Txns returns the transactions recorded so far (transaction i is
// element i). The slice is the history's: do not change it.
func (h *History) Txns() []Txn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.txns[:len(h.txns):len(h.txns)]
}

// Check checks the transactions recorded so far with Serializable.
func (h *History) Check() error { return Serializable(h.Txns()) }
