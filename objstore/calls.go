package objstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// The client's calls: one request and one reply each (a round trip on the
// socket), pipelined with other goroutines' calls.

// Create makes an unsealed object id of size data bytes with a copy of
// metadata after them, and returns its data as a writable slice of the
// store's shared memory. The client holds the creator's reference: Seal
// (or Abort) it, then Release it. Errors wrap ErrExists, ErrBadSize,
// ErrStoreFull, ErrDisconnected or ctx's error.
func (c *Client) Create(ctx context.Context, id ID, size int, metadata []byte) ([]byte, error) {
	if size < 0 || len(metadata) > MaxMetadataSize || int64(size) > c.maxObject-int64(len(metadata)) {
		return nil, fmt.Errorf("objstore: create %s: %w: %d data and %d metadata bytes (limit %d)", id, ErrBadSize, size, len(metadata), c.maxObject)
	}
	b, err := c.call(ctx, &request{typ: msgCreate, id: id, dataSize: int64(size), meta: metadata})
	if err != nil {
		return nil, fmt.Errorf("objstore: create %s: %w", id, err)
	}
	p := payload{b: b}
	off := p.size()
	if err := p.end(); err != nil || off+int64(size)+int64(len(metadata)) > int64(len(c.rw)) {
		return nil, fmt.Errorf("objstore: create %s: %w: object at %d outside the arena", id, ErrProtocol, off)
	}
	end := off + int64(size)
	return c.rw[off:end:end], nil
}

// Seal makes the object id, which this client created, immutable and
// visible to every client: blocked Gets wake and subscribers hear of it.
// The client keeps its reference. Errors wrap ErrNotFound, ErrSealed or
// ErrNotOwner.
func (c *Client) Seal(ctx context.Context, id ID) error {
	return c.simple(ctx, msgSeal, "seal", id)
}

// Abort removes the unsealed object id this client created and frees
// its memory. Errors wrap ErrNotFound, ErrSealed or ErrNotOwner.
func (c *Client) Abort(ctx context.Context, id ID) error {
	return c.simple(ctx, msgAbort, "abort", id)
}

// Release drops one of this client's references to the sealed object id
// (from Create or Get); the Buffer's views must not be used after it.
// An object with no references left may be evicted. Errors wrap
// ErrNotFound, ErrNotSealed or ErrNotOwner (no reference held).
func (c *Client) Release(ctx context.Context, id ID) error {
	return c.simple(ctx, msgRelease, "release", id)
}

func (c *Client) simple(ctx context.Context, typ byte, what string, id ID) error {
	b, err := c.call(ctx, &request{typ: typ, id: id})
	if err == nil && len(b) != 0 {
		err = fmt.Errorf("%w: %d trailing reply bytes", ErrProtocol, len(b))
	}
	if err != nil {
		return fmt.Errorf("objstore: %s %s: %w", what, id, err)
	}
	return nil
}

// Get returns the sealed objects ids, waiting up to timeout for those
// not sealed yet (a timeout below zero waits until ctx ends; zero does
// not wait). The result has one entry per ID: a Buffer, holding a
// reference until Release, or nil for an object still missing when the
// timeout passed (never created, deleted, evicted, or not sealed yet —
// Plasma's semantics: a missing object is not an error). One round trip
// whatever the objects' sizes: the views are of the shared arena.
// When ctx ends first, Get returns its error and leaves no waiter and no
// reference behind.
func (c *Client) Get(ctx context.Context, ids []ID, timeout time.Duration) ([]*Buffer, error) {
	if len(ids) > maxIDs {
		return nil, fmt.Errorf("objstore: get: %w: %d IDs (at most %d)", ErrBadID, len(ids), maxIDs)
	}
	if dl, ok := ctx.Deadline(); ok && timeout < 0 {
		timeout = max(time.Until(dl), 1)
	}
	b, err := c.call(ctx, &request{typ: msgGet, ids: ids, timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("objstore: get %d objects: %w", len(ids), err)
	}
	p := payload{b: b}
	n := p.count(getEntrySize, maxIDs)
	if p.err == nil && n != len(ids) {
		p.fail("get reply count")
	}
	out := make([]*Buffer, n)
	for i := range n {
		present, off, dsize, msize := p.u8(), p.size(), p.size(), p.size()
		if present == 0 {
			continue
		}
		end := off + dsize + msize
		if off > int64(len(c.ro)) || dsize > int64(len(c.ro)) || msize > int64(len(c.ro)) || end > int64(len(c.ro)) {
			p.fail("object outside the arena")
			break
		}
		out[i] = &Buffer{ID: ids[i], Data: c.ro[off : off+dsize : off+dsize], Metadata: c.ro[off+dsize : end : end]}
	}
	if err := p.end(); err != nil {
		return nil, fmt.Errorf("objstore: get: %w", err)
	}
	return out, nil
}

// Delete removes each sealed object of ids that no client references
// and nothing pins. The error joins one error per ID that failed
// (wrapping ErrNotFound, ErrInUse).
func (c *Client) Delete(ctx context.Context, ids ...ID) error {
	b, err := c.call(ctx, &request{typ: msgDelete, ids: ids})
	if err != nil {
		return fmt.Errorf("objstore: delete: %w", err)
	}
	errs, err := perID(b, ids, "delete")
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// Contains says whether the store holds the sealed object id.
func (c *Client) Contains(ctx context.Context, id ID) (bool, error) {
	b, err := c.call(ctx, &request{typ: msgContains, id: id})
	if err != nil {
		return false, fmt.Errorf("objstore: contains %s: %w", id, err)
	}
	p := payload{b: b}
	present := p.u8()
	if err := p.end(); err != nil {
		return false, fmt.Errorf("objstore: contains %s: %w", id, err)
	}
	return present == 1, nil
}

// List describes the store's objects (at most MaxListObjects), sealed or
// being created, oldest first.
func (c *Client) List(ctx context.Context) ([]ObjectInfo, error) {
	b, err := c.call(ctx, &request{typ: msgList})
	if err != nil {
		return nil, fmt.Errorf("objstore: list: %w", err)
	}
	return decodeList(b)
}

// Fetch makes the objects ids present in the local store, pulling those
// it lacks from other stores through the store's Fetcher. errs[i] is nil
// when ids[i] is present afterwards, else an error wrapping
// ErrUnavailable, ErrStoreFull or a context error; err is for the call as
// a whole (the connection, ctx).
func (c *Client) Fetch(ctx context.Context, ids []ID) ([]error, error) {
	b, err := c.call(ctx, &request{typ: msgFetch, ids: ids})
	if err != nil {
		return nil, fmt.Errorf("objstore: fetch %d objects: %w", len(ids), err)
	}
	return perID(b, ids, "fetch")
}

// perID decodes a reply of one status per ID.
func perID(b []byte, ids []ID, what string) ([]error, error) {
	p := payload{b: b}
	n := p.count(1, maxIDs)
	if p.err == nil && n != len(ids) {
		p.fail("status count")
	}
	errs := make([]error, n)
	for i := range n {
		if err := errorOf(p.u8()); err != nil {
			errs[i] = fmt.Errorf("objstore: %s %s: %w", what, ids[i], err)
		}
	}
	if err := p.end(); err != nil {
		return nil, fmt.Errorf("objstore: %s: %w", what, err)
	}
	return errs, nil
}

// Close disconnects from the store, which then drops this client's
// references and aborts its unsealed objects, and unmaps the arena: the
// slices Create and Get returned must not be used afterwards.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		if err := c.conn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			c.closeErr = err
		}
		<-c.done
		c.wmu.Lock()
		defer c.wmu.Unlock()
		if err := unix.Munmap(c.rw); err != nil && c.closeErr == nil {
			c.closeErr = err
		}
		if err := unix.Munmap(c.ro); err != nil && c.closeErr == nil {
			c.closeErr = err
		}
	})
	return c.closeErr
}
