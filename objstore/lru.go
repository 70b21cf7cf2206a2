package objstore

import "container/list"

// lru orders the evictable objects (sealed, no references, no pins) by
// the time they became evictable: the front was released longest ago and
// is evicted first. The store's lock guards it.
type lru struct {
	l     list.List
	bytes int64 // the arena bytes of the objects in it
}

// touch puts e at the back when it is evictable and takes it out when it
// is not: call it after every change of e's refs, pins or sealed.
func (q *lru) touch(e *entry) {
	switch {
	case e.evictable() && e.lru == nil:
		e.lru = q.l.PushBack(e)
		q.bytes += e.alloc
	case !e.evictable() && e.lru != nil:
		q.l.Remove(e.lru)
		e.lru = nil
		q.bytes -= e.alloc
	}
}

// remove takes e out (it is being freed).
func (q *lru) remove(e *entry) {
	if e.lru != nil {
		q.l.Remove(e.lru)
		e.lru = nil
		q.bytes -= e.alloc
	}
}

// oldest is the object to evict next, or nil.
func (q *lru) oldest() *entry {
	if f := q.l.Front(); f != nil {
		return f.Value.(*entry)
	}
	return nil
}

func (q *lru) len() int { return q.l.Len() }
