package object

import "context"

// Source is the holder's side of a transfer: the store's sealed objects.
type Source interface {
	// Pin holds the sealed object id until release is called (a pinned
	// object is neither evicted nor deleted) and returns its bytes — the
	// data followed by the metadata, in the store's shared memory — and
	// the data's size. It fails with an error wrapping ErrNotFound when
	// the store has no sealed object id. release is safe to call once.
	Pin(id ID) (obj []byte, dataSize int, release func(), err error)
}

// Sink is the fetcher's side of a transfer: where fetched objects are
// created.
type Sink interface {
	// Create makes an unsealed object of dataSize+metaSize bytes for id
	// and returns its memory (data followed by metadata). Exactly one of
	// commit or abort must be called: commit seals the object (visible to
	// Get and Contains from then on, released by the fetcher), abort
	// removes it and frees its memory, leaving nothing visible. Create
	// fails with an error wrapping ErrExists when the store already holds
	// id (sealed or being created) and ErrStoreFull when it has no room.
	Create(id ID, dataSize, metaSize int) (dst []byte, commit func() error, abort func(), err error)
}

// Fetcher pulls objects from other stores into a Sink (package
// objstore/transfer implements it). A store configured with one serves
// its clients' Fetch calls.
type Fetcher interface {
	// Fetch makes every object of ids present in sink, pulling each from
	// a store that holds it. errs[i] is nil when ids[i] is present
	// afterwards (it was already, or it was fetched), otherwise an error
	// wrapping ErrUnavailable, ErrStoreFull or ctx's error. Concurrent
	// fetches of one ID create it once.
	Fetch(ctx context.Context, ids []ID, sink Sink) (errs []error)
}
