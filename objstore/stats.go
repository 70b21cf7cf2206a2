package objstore

// Stats is a snapshot of a store's counters.
type Stats struct {
	// Objects is the number of objects, sealed or being created.
	Objects int
	// Sealed and Unsealed split Objects.
	Sealed, Unsealed int
	// BytesAllocated is the arena bytes objects take (each rounded up to
	// Alignment); BytesFree the rest; ArenaBytes their sum, Config.Mem
	// rounded down to Alignment.
	BytesAllocated, BytesFree, ArenaBytes int64
	// LargestFree is the largest object (data plus metadata) that fits
	// without eviction.
	LargestFree int64
	// ResidentBytes is the arena's memory the kernel holds now (mincore):
	// what objects touched, less what released runs gave back.
	ResidentBytes int64
	// Clients is the number of connected clients.
	Clients int
	// References is the sum of every object's client references; Pins
	// the number of Source pins held.
	References, Pins int
	// Evictable is the number of sealed objects with no reference or pin
	// (the LRU list).
	Evictable int
	// Evictions counts objects evicted to make room since NewStore.
	Evictions int64
	// Waiters is the number of Get calls blocked waiting for a seal.
	Waiters int
	// Subscribers is the number of live subscriptions.
	Subscribers int
	// PendingReplies is the number of replies queued to clients and not
	// yet written (bounded by MaxOutstanding per client).
	PendingReplies int
	// Fetches is the number of Fetch calls running.
	Fetches int
}
