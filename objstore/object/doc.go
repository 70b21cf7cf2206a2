// Package object holds what every part of rdmakit's object store
// (package objstore) shares: the 20-byte object ID, the typed errors, and
// the two small interfaces through which a store's memory meets the
// cross-node transfer protocols (package objstore/transfer): a Source the
// holder pins sealed objects from and a Sink the fetcher creates them in.
// It imports nothing of rdmakit, so the store and the protocols depend on
// it and not on each other.
package object
