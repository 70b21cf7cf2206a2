package verbs

import (
	"runtime"
	"sync"
)

// Combiner posts, as one list, the work requests that several goroutines
// submit at the same time: the software doorbell batching of many tasks
// that share a QP. A submitter that finds nobody posting becomes the
// poster: with Yield it yields once first, so that the goroutines ready
// to submit join its list, then it posts everything queued, batch after
// batch, until the queue is empty. The other submitters return at once.
// Set Post (and Fail) before the first Submit; safe for concurrent use.
type Combiner struct {
	// Post posts one batch: QP.PostSend, or PostAll to wait out a full
	// send queue.
	Post func(batch []SendWR) error
	// Fail is told of a batch whose Post failed, with the error; it runs
	// with the combiner locked. The batch's lists never complete, so Fail
	// fails their owners. Nil: ignore.
	Fail func(batch []SendWR, err error)
	// Yield makes the poster yield once before its first post.
	Yield bool

	mu      sync.Mutex
	pending []SendWR
	spare   []SendWR
	posting bool
}

// Submit queues wrs and, unless another goroutine is posting, posts
// everything queued. It copies the requests (not their SGLs, which must
// stay valid until the requests complete).
func (c *Combiner) Submit(wrs ...SendWR) {
	c.mu.Lock()
	c.pending = append(c.pending, wrs...)
	if c.posting {
		c.mu.Unlock()
		return
	}
	c.posting = true
	if c.Yield {
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
	}
	for len(c.pending) > 0 {
		batch := c.pending
		c.pending = c.spare[:0]
		c.mu.Unlock()
		err := c.Post(batch)
		c.mu.Lock()
		if err != nil && c.Fail != nil {
			c.Fail(batch, err)
		}
		c.spare = batch[:0]
	}
	c.posting = false
	c.mu.Unlock()
}
