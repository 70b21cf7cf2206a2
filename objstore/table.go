package objstore

import "time"

// entry is one object in the store's table.
type entry struct {
	id                 ID
	off, alloc         int64 // the run in the arena: data at off, metadata right after
	dataSize, metaSize int64
	sealed             bool
	owner              *session // the creator until Seal or Abort; s.sink for Sink objects
	refs               int      // client references, summed over clients
	pins               int      // Source pins
	createdAt          time.Time
	inLRU              bool   // in the LRU list (sealed, no refs, no pins)
	prev, next         *entry // its neighbours there
}

// evictable says whether e may be evicted or deleted: sealed, and
// neither referenced nor pinned.
func (e *entry) evictable() bool { return e.sealed && e.refs == 0 && e.pins == 0 }

// ObjectInfo describes an object, as List returns it.
type ObjectInfo struct {
	// ID names the object.
	ID ID
	// DataSize and MetadataSize are its sizes in bytes.
	DataSize, MetadataSize int64
	// Sealed says whether it is sealed (visible to Get).
	Sealed bool
	// RefCount is the number of client references to it.
	RefCount int
	// CreatedAt is when it was created, by the store's clock.
	CreatedAt time.Time
}
