//go:build !linux

package nic

// membarrierAvailable reports false: without membarrier(2) a solo QP
// publishes its completions with a sequentially consistent store.
func membarrierAvailable() bool { return false }

// membarrier is never called where membarrierAvailable is false.
func membarrier() {}
