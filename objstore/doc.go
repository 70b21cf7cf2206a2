// Package objstore is a Plasma-style in-memory object store: a store
// process keeps immutable objects in one arena of shared memory and
// serves local clients over a Unix domain socket; the clients read and
// write the objects in place (zero copy). Cross-node fetch plugs in
// through Config.Fetcher (package objstore/transfer), which reads
// sealed objects through Store.Source and creates fetched ones through
// Store.Sink.
//
// # Objects
//
// An object is named by a 20-byte ID, holds data and metadata, and is
// created unsealed by one client (Create returns a writable slice of
// shared memory), then sealed (Seal: immutable and visible from then on)
// or aborted (Abort). Get blocks until objects are sealed or a timeout
// passes and returns read-only views; each view holds a reference until
// Release. A reference count is kept per object and per client (two Gets
// of one object hold two references). Delete removes an object no one
// references. When an allocation does not fit, the store evicts sealed
// objects nobody references or pins, least recently released first;
// ErrStoreFull says that even that would not make room.
package objstore
