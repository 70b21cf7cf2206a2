package objstore

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// The store's operations on its table, each under s.mu, on behalf of a
// session (a client, or s.sink for the transfer layer). The server and
// Sink/Source call them; they never block.

// create makes an unsealed object of dataSize data bytes and metaSize
// metadata bytes owned by c, copies meta (when not nil) after the data,
// and gives c the creator's reference (except the store's own sink).
func (s *Store) create(c *session, id ID, dataSize, metaSize int64, meta []byte) (*entry, error) {
	if dataSize < 0 || metaSize < 0 || metaSize > MaxMetadataSize || dataSize > s.cfg.MaxObjectSize-metaSize {
		return nil, fmt.Errorf("%w: %d data and %d metadata bytes (limit %d)", ErrBadSize, dataSize, metaSize, s.cfg.MaxObjectSize)
	}
	if s.closed {
		return nil, ErrClosed
	}
	if _, ok := s.objects[id]; ok {
		return nil, fmt.Errorf("%w: %s", ErrExists, id)
	}
	total := dataSize + metaSize
	off, err := s.allocate(total)
	if err != nil {
		return nil, err
	}
	e := &entry{id: id, off: off, alloc: roundUp(total), dataSize: dataSize, metaSize: metaSize, owner: c, createdAt: time.Now()}
	if meta != nil {
		copy(s.arena.mem[off+dataSize:off+total], meta)
	}
	s.objects[id] = e
	c.created[id] = e
	if c != s.sink {
		s.addRef(c, e)
	}
	return e, nil
}

// allocate finds room for n bytes, evicting the least recently released
// objects while it does not fit. It evicts nothing when even evicting
// everything evictable would not make n bytes free.
func (s *Store) allocate(n int64) (int64, error) {
	if off, ok := s.alloc.alloc(n); ok {
		return off, nil
	}
	if roundUp(n) > s.alloc.freeBytes()+s.lru.bytes {
		return 0, fmt.Errorf("%w: %d bytes wanted, %d free, %d evictable", ErrStoreFull, n, s.alloc.freeBytes(), s.lru.bytes)
	}
	for {
		victim := s.lru.oldest()
		if victim == nil {
			return 0, fmt.Errorf("%w: %d bytes wanted, largest free run %d after evicting all", ErrStoreFull, n, s.alloc.largest())
		}
		s.log.Debug("objstore: evict", "id", victim.id, "bytes", victim.alloc)
		s.free(victim)
		s.evictions++
		if off, ok := s.alloc.alloc(n); ok {
			return off, nil
		}
	}
}

// free removes e from the table and returns its memory to the arena.
func (s *Store) free(e *entry) {
	delete(s.objects, e.id)
	s.lru.remove(e)
	merged := s.alloc.release(e.off, e.alloc)
	if s.cfg.KeepResident == 0 {
		if err := s.arena.punch(merged); err != nil {
			s.log.Warn("objstore: give memory back", "err", err)
		}
		return
	}
	// Bytes freed since the last give-back bound the free memory still
	// resident; past KeepResident, every free run goes back.
	s.warm += e.alloc
	if s.warm <= s.cfg.KeepResident {
		return
	}
	s.warm = 0
	for _, f := range s.alloc.free {
		if err := s.arena.punch(f); err != nil {
			s.log.Warn("objstore: give memory back", "err", err)
			return
		}
	}
}

// addRef gives c one more reference to e.
func (s *Store) addRef(c *session, e *entry) {
	c.refs[e.id]++
	e.refs++
	s.refs++
	s.lru.touch(e)
}

// dropRefs takes n of c's references to e away.
func (s *Store) dropRefs(c *session, e *entry, n int) {
	if left := c.refs[e.id] - n; left > 0 {
		c.refs[e.id] = left
	} else {
		delete(c.refs, e.id)
	}
	e.refs -= n
	s.refs -= n
	s.lru.touch(e)
}

// created is c's unsealed object id, or why op (seal, abort) cannot
// have it: ErrNotFound, ErrSealed, ErrNotOwner.
func (s *Store) created(c *session, id ID, op string) (*entry, error) {
	e, ok := s.objects[id]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: %s %s", ErrNotFound, op, id)
	case e.sealed:
		return nil, fmt.Errorf("%w: %s %s", ErrSealed, op, id)
	case e.owner != c:
		return nil, fmt.Errorf("%w: %s %s", ErrNotOwner, op, id)
	}
	return e, nil
}

// seal makes c's unsealed object id visible: Gets waiting for it wake,
// subscribers hear of it. The creator keeps its reference.
func (s *Store) seal(c *session, id ID) error {
	e, err := s.created(c, id, "seal")
	if err != nil {
		return err
	}
	e.sealed = true
	e.owner = nil
	delete(c.created, id)
	s.lru.touch(e)
	s.wake(e)
	s.notify(id)
	return nil
}

// abort removes c's unsealed object id and frees its memory.
func (s *Store) abort(c *session, id ID) error {
	e, err := s.created(c, id, "abort")
	if err != nil {
		return err
	}
	if n := c.refs[id]; n > 0 {
		s.dropRefs(c, e, n)
	}
	delete(c.created, id)
	s.free(e)
	return nil
}

// release drops one of c's references to the sealed object id.
func (s *Store) release(c *session, id ID) error {
	e, ok := s.objects[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: release %s", ErrNotFound, id)
	case !e.sealed:
		return fmt.Errorf("%w: release %s", ErrNotSealed, id)
	case c.refs[id] == 0:
		return fmt.Errorf("%w: release %s: no reference held", ErrNotOwner, id)
	}
	s.dropRefs(c, e, 1)
	return nil
}

// remove deletes the sealed, unreferenced, unpinned object id.
func (s *Store) remove(id ID) error {
	e, ok := s.objects[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: delete %s", ErrNotFound, id)
	case !e.sealed:
		return fmt.Errorf("%w: delete %s: being created", ErrInUse, id)
	case e.refs > 0 || e.pins > 0:
		return fmt.Errorf("%w: delete %s: %d references, %d pins", ErrInUse, id, e.refs, e.pins)
	}
	s.free(e)
	return nil
}

// contains says whether id is sealed in the store.
func (s *Store) contains(id ID) bool {
	e, ok := s.objects[id]
	return ok && e.sealed
}

// list describes up to MaxListObjects objects, oldest first.
func (s *Store) list() []ObjectInfo {
	out := make([]ObjectInfo, 0, min(len(s.objects), MaxListObjects))
	for _, e := range s.objects {
		out = append(out, ObjectInfo{ID: e.id, DataSize: e.dataSize, MetadataSize: e.metaSize, Sealed: e.sealed, RefCount: e.refs, CreatedAt: e.createdAt})
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(string(a.ID[:]), string(b.ID[:]))
	})
	return out[:min(len(out), MaxListObjects)]
}

// dropSession undoes what a departed client left: its unsealed objects
// are aborted, its references dropped, its blocked Gets, subscriptions
// and fetches ended.
func (s *Store) dropSession(c *session) {
	for id := range c.created {
		if err := s.abort(c, id); err != nil {
			s.log.Warn("objstore: abort a departed client's object", "id", id, "err", err)
		}
	}
	for id, n := range c.refs {
		if e, ok := s.objects[id]; ok {
			s.dropRefs(c, e, n)
		}
	}
	for _, w := range c.waiters {
		s.unwait(w)
	}
	s.subscribers -= len(c.subs)
	clear(c.subs)
	delete(s.subscribed, c)
	for _, cancel := range c.fetches {
		cancel()
	}
	delete(s.sessions, c)
}
