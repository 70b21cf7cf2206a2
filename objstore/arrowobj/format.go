package arrowobj

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// Magic is the metadata Put stores with every Arrow object.
var Magic = []byte("arrowipc")

// Size returns the number of bytes Write needs for rec.
func Size(rec arrow.RecordBatch) (int, error) {
	var c counter
	if err := encode(&c, rec); err != nil {
		return 0, err
	}
	return c.n + trailerSize, nil
}

// Write encodes rec into dst — the Arrow IPC file, then the trailer — and
// returns the number of bytes written (Size's answer). It fails with
// ErrShortBuffer when dst is too small.
func Write(dst []byte, rec arrow.RecordBatch) (int, error) {
	w := fixedWriter{buf: dst}
	if err := encode(&w, rec); err != nil {
		return 0, err
	}
	if len(dst)-w.n < trailerSize {
		return 0, fmt.Errorf("%w: %d bytes do not fit in %d", ErrShortBuffer, w.n+trailerSize, len(dst))
	}
	if err := seal(dst[:w.n+trailerSize]); err != nil {
		return 0, err
	}
	return w.n + trailerSize, nil
}

// encode writes rec as an IPC file with one record batch.
func encode(w io.Writer, rec arrow.RecordBatch) error {
	fw, err := ipc.NewFileWriter(w, ipc.WithSchema(rec.Schema()))
	if err != nil {
		return fmt.Errorf("arrowobj: %w", err)
	}
	if err := fw.Write(rec); err != nil {
		_ = fw.Close()
		return fmt.Errorf("arrowobj: encode record: %w", err)
	}
	if err := fw.Close(); err != nil {
		return fmt.Errorf("arrowobj: encode footer: %w", err)
	}
	return nil
}

// counter is an io.Writer that only counts.
type counter struct{ n int }

func (c *counter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// fixedWriter writes into a fixed slice and fails when it is full.
type fixedWriter struct {
	buf []byte
	n   int
}

func (w *fixedWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.buf)-w.n {
		return 0, fmt.Errorf("%w: %d bytes do not fit in %d", ErrShortBuffer, w.n+len(p), len(w.buf))
	}
	w.n += copy(w.buf[w.n:], p)
	return len(p), nil
}

// Read decodes the record batch in buf without copying: the returned
// record's column buffers are sub-slices of buf, so buf must stay valid
// and unchanged until the record is no longer used. The caller releases
// the record. A malformed buf gives an error wrapping ErrCorrupt.
func Read(buf []byte) (rec arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			if rec != nil {
				rec.Release()
			}
			rec, err = nil, fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	file, err := check(buf)
	if err != nil {
		return nil, err
	}
	fr, err := ipc.NewMappedFileReader(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	defer fr.Close()
	if n := fr.NumRecords(); n != 1 {
		return nil, fmt.Errorf("%w: %d record batches, want 1", ErrCorrupt, n)
	}
	rec, err = fr.RecordBatchAt(0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err := validate(rec); err != nil {
		rec.Release()
		return nil, errors.Join(ErrCorrupt, err)
	}
	return rec, nil
}
