// Package blockstore is rdmakit's replicated block store: the Store
// interface every design implements, a volume's layout, and its errors
// (docs/blockstore.md). A volume is a fixed number of numbered blocks of
// one size, chosen when it is created, replicated on n = 2f+1 replicas;
// every Read and Write is linearizable and completes while a majority of
// the replicas answers. The designs live in the subpackages:
// blockstore/prismrs (multi-writer ABD on PRISM's indirect READ,
// ALLOCATE and enhanced CAS: no replica CPU on the data path) and
// blockstore/abdrpc (the same protocol run by each replica's CPU over
// RPC, the traditional store PRISM-RS is compared with).
package blockstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Limits of a volume's block size, and the default.
const (
	MinBlockSize     = 512
	MaxBlockSize     = 64 << 10
	DefaultBlockSize = 4 << 10
	// MaxBlocks bounds a volume's block count (the replicas' memory is
	// what really bounds it: Layout.Bytes).
	MaxBlocks = 1 << 24
)

// Errors of Store operations and of volume creation. Designs wrap them
// with %w.
var (
	// ErrBlockSize: data of another size than the volume's blocks, or a
	// block size out of limits at creation.
	ErrBlockSize = errors.New("blockstore: wrong block size")
	// ErrOutOfRange: a block id at or past the volume's block count.
	ErrOutOfRange = errors.New("blockstore: block id out of range")
	// ErrNoQuorum: a majority of the replicas did not answer before the
	// context ended (or cannot: too many are gone).
	ErrNoQuorum = errors.New("blockstore: no quorum")
	// ErrNoVolume: the replicas hold no volume (or disagree on it).
	ErrNoVolume = errors.New("blockstore: unknown volume")
	// ErrReplicas: a replica list that cannot form a volume (empty, an
	// even count, duplicates, more than MaxReplicas).
	ErrReplicas = errors.New("blockstore: bad replica list")
	// ErrProtocol: a replica answered something no correct replica
	// sends.
	ErrProtocol = errors.New("blockstore: protocol violation")
	// ErrClosed: the client is closed.
	ErrClosed = errors.New("blockstore: closed")
)

// MaxReplicas is the largest replica set a volume may have.
const MaxReplicas = 7

// Store is a block store client. Its methods are safe for concurrent
// use; each is linearizable (a register per block).
type Store interface {
	// Read returns block id's latest value (BlockSize bytes; zeros for
	// a block never written), appended to dst.
	Read(ctx context.Context, id uint64, dst []byte) ([]byte, error)
	// Write sets block id to data, exactly BlockSize bytes.
	Write(ctx context.Context, id uint64, data []byte) error
	// Layout is the volume's.
	Layout() Layout
	// Close releases the client.
	Close() error
}

// Layout is a volume's shape, stored on its replicas.
type Layout struct {
	BlockSize int    // bytes per block, MinBlockSize to MaxBlockSize
	Blocks    uint64 // block count: ids are 0 to Blocks-1
	Replicas  []string
}

// Check reports whether l can be a volume's layout.
func (l Layout) Check() error {
	if l.BlockSize < MinBlockSize || l.BlockSize > MaxBlockSize {
		return fmt.Errorf("%w: %d bytes (%d to %d)", ErrBlockSize, l.BlockSize, MinBlockSize, MaxBlockSize)
	}
	if l.Blocks == 0 || l.Blocks > MaxBlocks {
		return fmt.Errorf("%w: %d blocks (1 to %d)", ErrOutOfRange, l.Blocks, MaxBlocks)
	}
	return CheckReplicas(l.Replicas)
}

// CheckReplicas reports whether rs can be a volume's replica set: an odd
// count of distinct addresses, at most MaxReplicas.
func CheckReplicas(rs []string) error {
	if len(rs) == 0 || len(rs)%2 == 0 || len(rs) > MaxReplicas {
		return fmt.Errorf("%w: %d replicas (an odd count, 1 to %d)", ErrReplicas, len(rs), MaxReplicas)
	}
	seen := make(map[string]bool, len(rs))
	for _, r := range rs {
		if r == "" || seen[r] {
			return fmt.Errorf("%w: %q is empty or named twice", ErrReplicas, r)
		}
		seen[r] = true
	}
	return nil
}

// CheckOp reports whether a Read or Write of block id (with data of n
// bytes; n < 0 for a Read) fits the layout.
func (l Layout) CheckOp(id uint64, n int) error {
	if id >= l.Blocks {
		return fmt.Errorf("%w: block %d of %d", ErrOutOfRange, id, l.Blocks)
	}
	if n >= 0 && n != l.BlockSize {
		return fmt.Errorf("%w: %d bytes for %d-byte blocks", ErrBlockSize, n, l.BlockSize)
	}
	return nil
}

// Quorum is the number of replicas that make a majority of n.
func Quorum(n int) int { return n/2 + 1 }

// Equal reports whether l and o are one layout: same block size and
// count, same replica list in the same order.
func (l Layout) Equal(o Layout) bool {
	return l.BlockSize == o.BlockSize && l.Blocks == o.Blocks && slices.Equal(l.Replicas, o.Replicas)
}

// SameReplicas reports whether a and b name the same replicas, in any
// order (each list's addresses are distinct: CheckReplicas).
func SameReplicas(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
