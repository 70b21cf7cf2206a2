package arrowobj

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/object"
)

// Creator is the part of an object-store client Put needs
// (objstore.Client has these methods).
type Creator interface {
	// Create makes an unsealed object and returns its writable memory.
	Create(ctx context.Context, id object.ID, size int, metadata []byte) ([]byte, error)
	// Seal makes the object immutable and visible.
	Seal(ctx context.Context, id object.ID) error
	// Abort removes an unsealed object.
	Abort(ctx context.Context, id object.ID) error
	// Release drops the creator's reference, which Create took.
	Release(ctx context.Context, id object.ID) error
}

// Put writes rec into a new object id: Create of Size(rec) bytes with
// Magic as metadata, Write straight into the store's memory, Seal, and
// Release of the creator's reference (the sealed object stays in the
// store until deleted or evicted). On any failure after Create the
// object is aborted, so nothing half-written is ever visible — also when
// ctx ends (the clean-up does not use it). When ctx ends while the Seal
// is on its way and the store seals the object anyway, Put returns nil:
// the object is there, sealed and released, as if ctx had ended later.
func Put(ctx context.Context, c Creator, id object.ID, rec arrow.RecordBatch) error {
	size, err := Size(rec)
	if err != nil {
		return err
	}
	dst, err := c.Create(ctx, id, size, Magic)
	if err != nil {
		return fmt.Errorf("arrowobj: put %s: %w", id, err)
	}
	// The abort must run also when ctx is what ended the put.
	cleanup := context.WithoutCancel(ctx)
	if _, err := Write(dst, rec); err != nil {
		return errors.Join(fmt.Errorf("arrowobj: put %s: %w", id, err), c.Abort(cleanup, id))
	}
	if err := c.Seal(ctx, id); err != nil {
		aerr := c.Abort(cleanup, id)
		if !errors.Is(aerr, object.ErrSealed) {
			return errors.Join(fmt.Errorf("arrowobj: put %s: %w", id, err), aerr)
		}
		// ctx ended after the store had sealed the object: the put took
		// effect; give the creator's reference back as below.
	}
	if err := c.Release(cleanup, id); err != nil {
		return fmt.Errorf("arrowobj: put %s: %w", id, err)
	}
	return nil
}

// Getter is the part of an object-store client GetRecord needs
// (objstore.Client has these methods).
type Getter interface {
	// Get waits up to timeout for the objects to be sealed and returns
	// them (nil for one still missing), holding a reference to each
	// until Release.
	Get(ctx context.Context, ids []object.ID, timeout time.Duration) ([]*objstore.Buffer, error)
	// Release drops the reference Get took.
	Release(ctx context.Context, id object.ID) error
}

// GetRecord gets object id and decodes it without copying. The record's
// column buffers are the store's memory: call release (once) when done
// with the record; it releases the record and the object reference.
func GetRecord(ctx context.Context, g Getter, id object.ID, timeout time.Duration) (rec arrow.RecordBatch, release func() error, err error) {
	bufs, err := g.Get(ctx, []object.ID{id}, timeout)
	if err != nil {
		return nil, nil, fmt.Errorf("arrowobj: get %s: %w", id, err)
	}
	if len(bufs) != 1 || bufs[0] == nil {
		return nil, nil, fmt.Errorf("arrowobj: get %s: %w", id, object.ErrNotFound)
	}
	v := bufs[0]
	cleanup := context.WithoutCancel(ctx) // the reference goes back whatever ctx does
	if !bytes.Equal(v.Metadata, Magic) {
		return nil, nil, errors.Join(fmt.Errorf("%w: object %s has metadata %q", ErrNotArrow, id, v.Metadata), g.Release(cleanup, id))
	}
	rec, err = Read(v.Data)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("arrowobj: get %s: %w", id, err), g.Release(cleanup, id))
	}
	release = func() error {
		rec.Release()
		return g.Release(cleanup, id)
	}
	return rec, release, nil
}
