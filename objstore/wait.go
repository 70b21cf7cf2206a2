package objstore

import (
	"fmt"
	"slices"
	"time"
)

// waiter is a Get blocked until its objects are sealed, its timeout
// passes, its client cancels it or its client goes.
type waiter struct {
	c       *session
	reqID   uint32
	ids     []ID
	missing int // distinct IDs not sealed yet
	timer   *time.Timer
}

// get serves a Get of ids from c under s.mu: when every object is sealed
// (or timeout is 0) it returns the reply, appended to buf[:0]; otherwise
// it registers a waiter that replies later and returns nil. A timeout
// below zero waits until the client cancels or goes.
func (s *Store) get(c *session, reqID uint32, ids []ID, timeout time.Duration, buf []byte) ([]byte, error) {
	missing := s.missing(ids)
	if missing == 0 || timeout == 0 || s.closed {
		return s.getReply(c, reqID, ids, buf), nil
	}
	if _, dup := c.waiters[reqID]; dup {
		return nil, fmt.Errorf("%w: request %d already waiting", ErrProtocol, reqID)
	}
	if len(c.waiters) >= s.cfg.MaxOutstanding/2 {
		return nil, fmt.Errorf("%w: %d Gets blocked", ErrBusy, len(c.waiters))
	}
	w := &waiter{c: c, reqID: reqID, ids: slices.Clone(ids), missing: missing}
	for i, id := range w.ids {
		if !s.contains(id) && !slices.Contains(w.ids[:i], id) {
			s.waiting[id] = append(s.waiting[id], w)
		}
	}
	c.waiters[reqID] = w
	s.waiters++
	if timeout > 0 {
		w.timer = time.AfterFunc(timeout, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if c.waiters[reqID] == w {
				s.finish(w)
			}
		})
	}
	return nil, nil
}

// missing counts the distinct IDs of ids that are not sealed.
func (s *Store) missing(ids []ID) int {
	n := 0
	for i, id := range ids {
		if !s.contains(id) && !slices.Contains(ids[:i], id) {
			n++
		}
	}
	return n
}

// getReply encodes a Get's reply into buf[:0], taking one reference for c
// to every sealed object of ids (one per occurrence).
func (s *Store) getReply(c *session, reqID uint32, ids []ID, buf []byte) []byte {
	f := newFrame(buf, msgGet|replyBit, reqID).u8(0).u32(uint32(len(ids)))
	for _, id := range ids {
		e, ok := s.objects[id]
		if !ok || !e.sealed {
			f = f.u8(0).u64(0).u64(0).u64(0)
			continue
		}
		s.addRef(c, e)
		f = f.u8(1).u64(uint64(e.off)).u64(uint64(e.dataSize)).u64(uint64(e.metaSize))
	}
	return f.done()
}

// wake tells the Gets waiting for e that it is sealed, and answers those
// that now have everything.
func (s *Store) wake(e *entry) {
	ws := s.waiting[e.id]
	delete(s.waiting, e.id)
	for _, w := range ws {
		if w.missing--; w.missing == 0 {
			s.finish(w)
		}
	}
}

// finish answers w with what is sealed now and forgets it.
func (s *Store) finish(w *waiter) {
	s.unwait(w)
	w.c.send(s.getReply(w.c, w.reqID, w.ids, nil))
}

// cancelWait answers c's blocked Get reqID, if any, with ctx canceled and
// forgets it.
func (s *Store) cancelWait(c *session, reqID uint32) bool {
	w, ok := c.waiters[reqID]
	if !ok {
		return false
	}
	s.unwait(w)
	c.send(statusReply(msgGet, reqID, errCanceled))
	return true
}

// unwait forgets w without answering it.
func (s *Store) unwait(w *waiter) {
	if w.timer != nil {
		w.timer.Stop()
	}
	for _, id := range w.ids {
		ws := s.waiting[id]
		if i := slices.Index(ws, w); i >= 0 {
			ws = slices.Delete(ws, i, i+1)
			if len(ws) == 0 {
				delete(s.waiting, id)
			} else {
				s.waiting[id] = ws
			}
		}
	}
	delete(w.c.waiters, w.reqID)
	s.waiters--
}
