//go:build !amd64 || race

package nic

import "sync/atomic"

// storeRel stores v at p with (at least) release ordering; elsewhere than
// amd64, and under the race detector, which must see the synchronisation,
// it is an atomic store.
func storeRel(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
