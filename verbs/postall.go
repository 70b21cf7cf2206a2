package verbs

import (
	"errors"
	"runtime"
	"time"
)

// PostAll posts wrs on qp, waiting out a full send queue: the requests
// already accepted stay posted, and the rest go again once room is free.
// While the queue is full it calls progress, which polls completions (the
// caller's CQ) and returns how many it handled; when that finds none it
// yields, then sleeps 10 µs between tries. It gives up, returning the
// queue-full error, when done closes. Any other error comes back at once.
func PostAll(qp QP, wrs []SendWR, progress func() int, done <-chan struct{}) error {
	for spins := 0; ; spins++ {
		err := qp.PostSend(wrs)
		if err == nil {
			return nil // before pe escapes to the heap: no allocation
		}
		n, full := queueFull(err)
		if !full {
			return err
		}
		wrs = wrs[n:]
		if progress() == 0 {
			select {
			case <-done:
				return err
			default:
			}
			if spins < 64 {
				runtime.Gosched()
			} else {
				time.Sleep(10 * time.Microsecond)
			}
		}
	}
}

// queueFull tells whether err is a post that stopped at a full send
// queue, and the index of the first request not posted.
func queueFull(err error) (int, bool) {
	var pe *PostError
	if !errors.As(err, &pe) || !errors.Is(err, ErrQueueFull) {
		return 0, false
	}
	return pe.Index, true
}
