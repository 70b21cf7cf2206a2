package nic

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// qpLock is a QP's lock (QP.mu). For a QP created SingleThreaded
// (verbs.QPInitAttr) it is biased toward its poster, as ibverbs' thread
// domain takes the provider's lock off a QP with one poster: PostSend
// enters with one locked instruction (the exchange of owner) and leaves
// with a plain release store, where a sync.Mutex costs two locked
// instructions. Every other holder — the link's completion path, the
// drain goroutine, Modify, Quiesce, endSolo — takes the mutex and then
// revokes the bias: it raises revoke and waits for the poster to leave.
// The two sides are Dekker's: the poster exchanges owner and then loads
// revoke, a holder exchanges revoke and then loads owner; both stores
// are sequentially consistent, so at least one of them sees the other.
//
// A second poster (the promise broken) finds owner taken and takes the
// mutex like any other holder: the lock stays correct, only slower.
type qpLock struct {
	mu      sync.Mutex
	biased  bool   // the QP is SingleThreaded; set at creation
	owner   uint64 // 1 while the poster holds the lock without mu
	revoke  uint64 // 1 while a holder of mu keeps the poster out
	byOwner bool   // the holder is the poster, without mu; guarded by the lock itself
}

// Lock takes the lock on the mutex path.
func (m *qpLock) Lock() {
	m.mu.Lock()
	if m.biased {
		atomic.StoreUint64(&m.revoke, 1)
		for i := 0; atomic.LoadUint64(&m.owner) != 0; i++ {
			// The poster's section is short and never blocks.
			if i < 64 {
				runtime.Gosched()
			} else {
				time.Sleep(time.Microsecond)
			}
		}
	}
}

// Unlock releases the lock, whichever way it was taken.
func (m *qpLock) Unlock() {
	if m.byOwner {
		m.byOwner = false
		storeRel(&m.owner, 0)
		return
	}
	if m.biased {
		storeRel(&m.revoke, 0)
	}
	m.mu.Unlock()
}

// lockPoster is Lock for PostSend: without the mutex on a biased lock
// that no other holder wants.
func (m *qpLock) lockPoster() {
	if m.biased {
		if atomic.SwapUint64(&m.owner, 1) == 0 {
			if atomic.LoadUint64(&m.revoke) == 0 {
				m.byOwner = true
				return
			}
			storeRel(&m.owner, 0) // a holder of mu wants it: wait on mu
		}
	}
	m.Lock()
}

// CreateCQEx implements verbs.CQCreatorEx. A SingleThreaded CQ is polled
// without a lock while one QP has it alone (solo.go).
func (n *Node) CreateCQEx(a verbs.CQInitAttr) (verbs.CQ, error) {
	cq, err := n.CreateCQ(a.Depth)
	if err != nil {
		return nil, err
	}
	c := cq.(*CQ)
	c.single = a.SingleThreaded
	c.fenceless = a.SingleThreaded && membarrierAvailable()
	return cq, nil
}
