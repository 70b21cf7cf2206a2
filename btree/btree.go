// Package btree is rdmakit's ordered index on remote memory: the Tree
// interface every design implements, its limits, errors and iterator.
// Keys are ordered as bytes (bytes.Compare). The designs live in the
// subpackages: btree/sherman (Sherman's B+link tree, every operation
// one-sided).
package btree

import (
	"context"
	"errors"
	"fmt"
)

// Limits of keys and values. A design's layout may choose smaller ones
// (it says so with ErrTooLarge).
const (
	MaxKey   = 64
	MaxValue = 1024
)

// Errors of Tree operations. Designs wrap them with %w.
var (
	// ErrNotFound: the key has no value.
	ErrNotFound = errors.New("btree: not found")
	// ErrTooLarge: an empty key, or a key or value longer than the
	// tree's limits.
	ErrTooLarge = errors.New("btree: key or value too large")
	// ErrUnreachable: a memory node does not answer or the connection
	// failed.
	ErrUnreachable = errors.New("btree: node unreachable")
	// ErrFull: the memory nodes have no room for another tree node.
	ErrFull = errors.New("btree: memory full")
	// ErrClosed: the client is closed.
	ErrClosed = errors.New("btree: closed")
	// ErrLayout: the memory holds a tree of another layout, or the
	// layout asked for is invalid.
	ErrLayout = errors.New("btree: layout mismatch")
)

// Tree is an ordered index client. Its methods are safe for concurrent
// use; Get, Put and Delete are linearizable.
type Tree interface {
	// Get appends the value of key to dst and returns it; ErrNotFound
	// when the key has none.
	Get(ctx context.Context, key, dst []byte) ([]byte, error)
	// Put inserts key or updates its value.
	Put(ctx context.Context, key, value []byte) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key []byte) error
	// Scan returns an iterator over the keys in [from, to) in byte
	// order, at most limit of them (limit ≤ 0: no limit). A nil from or
	// to is unbounded. Every key present for the whole scan is returned
	// once; keys written during it may or may not be.
	Scan(ctx context.Context, from, to []byte, limit int) Iterator
	// Close releases the client.
	Close() error
}

// Iterator walks the result of a Scan:
//
//	it := t.Scan(ctx, from, to, 100)
//	defer it.Close()
//	for it.Next() {
//		use(it.Key(), it.Value())
//	}
//	if err := it.Err(); err != nil { ... }
type Iterator interface {
	// Next advances to the next key; false at the end or on an error.
	Next() bool
	// Key is the current key, valid until the next call of Next.
	Key() []byte
	// Value is the current value, valid until the next call of Next.
	Value() []byte
	// Err is the error that ended the scan, if any.
	Err() error
	// Close releases the iterator; safe to call more than once.
	Close() error
}

// Check returns ErrTooLarge (wrapped) when key or value is out of the
// limits maxKey and maxValue.
func Check(key, value []byte, maxKey, maxValue int) error {
	if len(key) == 0 || len(key) > maxKey {
		return fmt.Errorf("%w: a %d-byte key (1 to %d)", ErrTooLarge, len(key), maxKey)
	}
	if len(value) > maxValue {
		return fmt.Errorf("%w: a %d-byte value (at most %d)", ErrTooLarge, len(value), maxValue)
	}
	return nil
}
