package verbs

// FreeLists is implemented by the memory regions of providers that
// implement OpAllocate (PRISM's ALLOCATE): the region's owner posts free
// buffers, peers' ALLOCATEs pop them. Package prism builds size-class
// allocators with safe recycling on it.
type FreeLists interface {
	// PostFree appends buffers of size bytes, at addrs inside the region,
	// to free list queue. Every buffer of a queue has the queue's first
	// size; a buffer outside the region or of another size is an error
	// wrapping ErrInvalidArg, and nothing is posted.
	PostFree(queue uint32, size uint32, addrs ...uint64) error
	// FreeLen returns the number of buffers in free list queue.
	FreeLen(queue uint32) int
	// Quiesce waits until every operation on the region that began before
	// the call has finished: a buffer that no pointer reaches any more may
	// be posted again after it, without a late operation touching it.
	Quiesce()
}
