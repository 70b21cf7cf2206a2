package objstore

// lru orders the evictable objects (sealed, no references, no pins) by
// the time they became evictable: the head was released longest ago and
// is evicted first. It is an intrusive doubly linked list through the
// entries (no allocation when an object comes and goes, as on every Get
// and Release). The store's lock guards it.
type lru struct {
	head, tail *entry
	n          int
	bytes      int64 // the arena bytes of the objects in it
}

// touch puts e at the tail when it is evictable and takes it out when it
// is not: call it after every change of e's refs, pins or sealed.
func (q *lru) touch(e *entry) {
	switch {
	case e.evictable() && !e.inLRU:
		e.inLRU = true
		e.prev, e.next = q.tail, nil
		if q.tail != nil {
			q.tail.next = e
		} else {
			q.head = e
		}
		q.tail = e
		q.n++
		q.bytes += e.alloc
	case !e.evictable() && e.inLRU:
		q.remove(e)
	}
}

// remove takes e out (it is being freed, or no longer evictable).
func (q *lru) remove(e *entry) {
	if !e.inLRU {
		return
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		q.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		q.tail = e.prev
	}
	e.prev, e.next, e.inLRU = nil, nil, false
	q.n--
	q.bytes -= e.alloc
}

// oldest is the object to evict next, or nil.
func (q *lru) oldest() *entry { return q.head }

func (q *lru) len() int { return q.n }
