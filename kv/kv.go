// Package kv is rdmakit's key-value stores on remote memory: the Store
// interface every design implements, its limits and errors, and the
// helpers the designs share (docs/kv.md). The designs live in the
// subpackages: kv/pilaf (READs plus RPC writes, self-verifying with
// CRC64) and kv/prismkv (PRISM's indirect READ and ALLOCATE / CAS chain).
package kv

import (
	"context"
	"errors"
	"fmt"
)

// Limits of keys and values.
const (
	MaxKey   = 256
	MaxValue = 64 << 10
)

// Errors of Store operations. Designs wrap them with %w.
var (
	// ErrNotFound: the key has no value.
	ErrNotFound = errors.New("kv: not found")
	// ErrTooLarge: a key longer than MaxKey, a value longer than
	// MaxValue, or an empty key.
	ErrTooLarge = errors.New("kv: key or value too large")
	// ErrUnreachable: the node does not answer or the connection failed.
	ErrUnreachable = errors.New("kv: node unreachable")
	// ErrFull: the node has no room for the item or its index is full.
	ErrFull = errors.New("kv: node full")
	// ErrClosed: the client is closed.
	ErrClosed = errors.New("kv: closed")
)

// Store is a key-value store client. Its methods are safe for concurrent
// use; each is linearizable.
type Store interface {
	// Get appends the value of key to dst and returns it; ErrNotFound
	// when the key has none.
	Get(ctx context.Context, key, dst []byte) ([]byte, error)
	// Put sets the value of key.
	Put(ctx context.Context, key, value []byte) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key []byte) error
	// Close releases the client.
	Close() error
}

// Check returns ErrTooLarge (wrapped) when key or value is out of limits.
func Check(key, value []byte) error {
	if len(key) == 0 || len(key) > MaxKey {
		return fmt.Errorf("%w: a %d-byte key (1 to %d)", ErrTooLarge, len(key), MaxKey)
	}
	if len(value) > MaxValue {
		return fmt.Errorf("%w: a %d-byte value (at most %d)", ErrTooLarge, len(value), MaxValue)
	}
	return nil
}

// Hash is the 64-bit hash every design places keys with (FNV-1a: stable
// across processes and hosts).
func Hash(key []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range key {
		h ^= uint64(b)
		h *= 1099511628211
	}
	// FNV's low bits mix poorly for short keys: finish with a
	// multiply-xorshift.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}
