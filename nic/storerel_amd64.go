//go:build amd64 && !race

package nic

// storeRel stores v at p with release ordering: every earlier store is
// visible before it to a goroutine that loads it atomically. On amd64
// (total store order) that is a plain MOV, where atomic.StoreUint64 is an
// XCHG, a locked instruction costing several nanoseconds; the hot path
// publishes indexes with it where no later load must be ordered after
// the store (see single.go and cq.go). It is written in assembly so that
// the compiler neither reorders nor elides it.
//
//go:noescape
func storeRel(p *uint64, v uint64)
