package arrowobj

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
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
}

// Put writes rec into a new object id: Create of Size(rec) bytes with
// Magic as metadata, Write straight into the store's memory, Seal. On any
// failure after Create the object is aborted, so nothing half-written is
// ever visible.
func Put(ctx context.Context, c Creator, id object.ID, rec arrow.RecordBatch) error {
	size, err := Size(rec)
	if err != nil {
		return err
	}
	dst, err := c.Create(ctx, id, size, Magic)
	if err != nil {
		return fmt.Errorf("arrowobj: put %s: %w", id, err)
	}
	if _, err := Write(dst, rec); err != nil {
		return errors.Join(fmt.Errorf("arrowobj: put %s: %w", id, err), c.Abort(ctx, id))
	}
	if err := c.Seal(ctx, id); err != nil {
		return errors.Join(fmt.Errorf("arrowobj: put %s: %w", id, err), c.Abort(ctx, id))
	}
	return nil
}

// View is a sealed object as a Getter returns it: its data and metadata,
// both in the store's memory.
type View struct {
	Data, Metadata []byte
}

// Getter is the part of an object-store client GetRecord needs.
type Getter interface {
	// GetOne waits up to timeout for id to be sealed and returns a view
	// of it, holding a reference until Release.
	GetOne(ctx context.Context, id object.ID, timeout time.Duration) (View, error)
	// Release drops the reference GetOne took.
	Release(ctx context.Context, id object.ID) error
}

// GetRecord gets object id and decodes it without copying. The record's
// column buffers are the store's memory: call release (once) when done
// with the record; it releases the record and the object reference.
func GetRecord(ctx context.Context, g Getter, id object.ID, timeout time.Duration) (rec arrow.RecordBatch, release func() error, err error) {
	v, err := g.GetOne(ctx, id, timeout)
	if err != nil {
		return nil, nil, fmt.Errorf("arrowobj: get %s: %w", id, err)
	}
	if !bytes.Equal(v.Metadata, Magic) {
		return nil, nil, errors.Join(fmt.Errorf("%w: object %s has metadata %q", ErrNotArrow, id, v.Metadata), g.Release(ctx, id))
	}
	rec, err = Read(v.Data)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("arrowobj: get %s: %w", id, err), g.Release(ctx, id))
	}
	release = func() error {
		rec.Release()
		return g.Release(context.WithoutCancel(ctx), id)
	}
	return rec, release, nil
}
