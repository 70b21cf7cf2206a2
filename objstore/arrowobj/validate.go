package arrowobj

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// validate checks every column of rec against its buffers (lengths,
// offsets, children, null counts), so that reading a value of a corrupted
// object fails here rather than panicking later in the caller.
func validate(rec arrow.RecordBatch) error {
	for i, col := range rec.Columns() {
		if int64(col.Len()) != rec.NumRows() {
			return fmt.Errorf("column %q: %d values in a batch of %d rows", rec.ColumnName(i), col.Len(), rec.NumRows())
		}
		if err := array.ValidateFull(col); err != nil {
			return fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
		}
	}
	return nil
}
