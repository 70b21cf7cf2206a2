package arrowobj

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// sampleSchema has a column of each layout family: fixed width, boolean
// bitmap, variable length, nested list, struct.
var sampleSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	{Name: "at", Type: arrow.StructOf(
		arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int16},
		arrow.Field{Name: "y", Type: arrow.BinaryTypes.Binary},
	)},
}, nil)

// sampleRecord builds n rows of sampleSchema with a null every 7th score
// and every 5th name.
func sampleRecord(t testing.TB, n int) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, sampleSchema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i) * 1000003)
		if i%7 == 3 {
			b.Field(1).(*array.Float64Builder).AppendNull()
		} else {
			b.Field(1).(*array.Float64Builder).Append(float64(i) / 3)
		}
		b.Field(2).(*array.BooleanBuilder).Append(i%3 == 0)
		if i%5 == 1 {
			b.Field(3).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(3).(*array.StringBuilder).Append(string(rune('a'+i%26)) + "-row")
		}
		lb := b.Field(4).(*array.ListBuilder)
		lb.Append(true)
		for j := range i % 4 {
			lb.ValueBuilder().(*array.Int32Builder).Append(int32(i + j))
		}
		sb := b.Field(5).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int16Builder).Append(int16(i))
		sb.FieldBuilder(1).(*array.BinaryBuilder).Append([]byte{byte(i), byte(i >> 8)})
	}
	return b.NewRecordBatch()
}

// encodeT is Size + Write, checked against each other.
func encodeT(t testing.TB, rec arrow.RecordBatch) []byte {
	t.Helper()
	size, err := Size(rec)
	if err != nil {
		t.Fatalf("Size: %v", err)
	}
	buf := make([]byte, size)
	n, err := Write(buf, rec)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if n != size {
		t.Fatalf("Write wrote %d bytes, Size said %d", n, size)
	}
	return buf
}

func TestRoundTrip(t *testing.T) {
	for _, rows := range []int{0, 1, 9, 1000} {
		rec := sampleRecord(t, rows)
		buf := encodeT(t, rec)
		got, err := Read(buf)
		if err != nil {
			t.Fatalf("%d rows: Read: %v", rows, err)
		}
		if !got.Schema().Equal(rec.Schema()) {
			t.Fatalf("%d rows: schema %v, want %v", rows, got.Schema(), rec.Schema())
		}
		if !array.RecordEqual(got, rec) {
			t.Fatalf("%d rows: record differs after the round trip", rows)
		}
		got.Release()
		rec.Release()
	}
}

// inside reports whether b's bytes lie within buf.
func inside(b, buf []byte) bool {
	if len(b) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(buf))
}

// TestReadDoesNotCopy proves zero copy: every column buffer of the record
// Read returns lies inside the bytes it was given, and a byte changed in
// those bytes shows in the record.
func TestReadDoesNotCopy(t *testing.T) {
	rec := sampleRecord(t, 100)
	defer rec.Release()
	buf := encodeT(t, rec)
	got, err := Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	var walk func(name string, d arrow.ArrayData)
	walk = func(name string, d arrow.ArrayData) {
		for i, b := range d.Buffers() {
			if b != nil && !inside(b.Bytes(), buf) {
				t.Errorf("column %s buffer %d (%d bytes) is not inside the object", name, i, b.Len())
			}
		}
		for _, c := range d.Children() {
			walk(name+".child", c)
		}
	}
	for i, col := range got.Columns() {
		walk(got.ColumnName(i), col.Data())
	}

	ids := got.Column(0).(*array.Int64)
	values := got.Column(0).Data().Buffers()[1].Bytes()
	values[8*5] ^= 0xff // row 5's low byte, written through the object's memory
	if want := int64(5*1000003) ^ 0xff; ids.Value(5) != want {
		t.Fatalf("row 5 reads %d after the object changed, want %d: the record is a copy", ids.Value(5), want)
	}
}

func TestWriteShortBuffer(t *testing.T) {
	rec := sampleRecord(t, 10)
	defer rec.Release()
	size, err := Size(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 7, size / 2, size - 1} {
		if _, err := Write(make([]byte, n), rec); !errors.Is(err, ErrShortBuffer) {
			t.Fatalf("Write into %d of %d bytes: %v, want ErrShortBuffer", n, size, err)
		}
	}
}

func TestReadRejectsGarbage(t *testing.T) {
	rec := sampleRecord(t, 3)
	defer rec.Release()
	good := encodeT(t, rec)
	cases := map[string][]byte{
		"empty":     nil,
		"magic":     []byte("ARROW1\x00\x00"),
		"truncated": good[:len(good)-1],
		"head only": good[:len(good)/2],
		"zeros":     make([]byte, len(good)),
	}
	for name, b := range cases {
		if r, err := Read(b); !errors.Is(err, ErrCorrupt) {
			if r != nil {
				r.Release()
			}
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestReadCorruptedBytes changes every byte of a small object in turn, to
// a few values, and reads it: each read must either fail with ErrCorrupt
// or give a record whose every value can be read — never panic.
func TestReadCorruptedBytes(t *testing.T) {
	rec := sampleRecord(t, 12)
	defer rec.Release()
	good := encodeT(t, rec)
	corrupted := 0
	buf := make([]byte, len(good))
	for i := range good {
		for _, v := range []byte{0x00, 0xff, good[i] ^ 0x01, 0x80} {
			if v == good[i] {
				continue
			}
			copy(buf, good)
			buf[i] = v
			got, err := Read(buf)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("byte %d = %#x: %v, not ErrCorrupt", i, v, err)
				}
				corrupted++
				continue
			}
			touchAll(got)
			got.Release()
		}
	}
	if corrupted == 0 {
		t.Fatal("no corruption was detected: the check is not running")
	}
}

// touchAll reads every value of rec (panicking if a buffer is short).
func touchAll(rec arrow.RecordBatch) {
	for _, col := range rec.Columns() {
		for i := range col.Len() {
			_ = col.ValueStr(i)
		}
	}
}

func FuzzRead(f *testing.F) {
	for _, rows := range []int{0, 1, 5} {
		rec := sampleRecord(f, rows)
		f.Add(encodeT(f, rec))
		rec.Release()
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := Read(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		touchAll(rec)
		rec.Release()
	})
}
