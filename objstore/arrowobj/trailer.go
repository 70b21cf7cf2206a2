package arrowobj

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// The trailer after the Arrow file guards its structure. The Arrow
// library trusts the lengths in the file's flatbuffers (a corrupted
// schema can make it allocate terabytes, which no recover catches), so
// Read checks a CRC over every byte except the column bodies before the
// library sees any of them. The bodies are left out so that Read stays
// independent of the object's size; a corrupted body is caught by the
// per-column validation instead (or is just a wrong value).
//
//	offset  size  field
//	0       8     fileLen: length of the Arrow file before the trailer
//	8       8     bodyStart: first byte of the column buffers
//	16      8     bodyEnd: end of the column buffers
//	24      4     CRC-32C of file[:bodyStart] ++ file[bodyEnd:] ++ trailer[:24]
//	28      4     zero
//	32      8     "ARROWOBJ"
const trailerSize = 40

var (
	trailerMagic = []byte("ARROWOBJ")
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

// seal writes the trailer into the last trailerSize bytes of obj, whose
// first bytes hold an Arrow file Write just encoded.
func seal(obj []byte) error {
	fileLen := len(obj) - trailerSize
	file := obj[:fileLen]
	start, end, err := bodyRange(file)
	if err != nil {
		return err
	}
	t := obj[fileLen:]
	binary.LittleEndian.PutUint64(t[0:], uint64(fileLen))
	binary.LittleEndian.PutUint64(t[8:], uint64(start))
	binary.LittleEndian.PutUint64(t[16:], uint64(end))
	binary.LittleEndian.PutUint32(t[24:], structureCRC(file, start, end, t))
	binary.LittleEndian.PutUint32(t[28:], 0)
	copy(t[32:], trailerMagic)
	return nil
}

// check verifies obj's trailer and returns the Arrow file before it.
func check(obj []byte) ([]byte, error) {
	if len(obj) < trailerSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the trailer", ErrCorrupt, len(obj))
	}
	fileLen := len(obj) - trailerSize
	t := obj[fileLen:]
	if !bytes.Equal(t[32:], trailerMagic) {
		return nil, fmt.Errorf("%w: no trailer", ErrCorrupt)
	}
	if n := binary.LittleEndian.Uint64(t[0:]); n != uint64(fileLen) {
		return nil, fmt.Errorf("%w: trailer says %d file bytes, object has %d", ErrCorrupt, n, fileLen)
	}
	start, end := binary.LittleEndian.Uint64(t[8:]), binary.LittleEndian.Uint64(t[16:])
	if start > end || end > uint64(fileLen) {
		return nil, fmt.Errorf("%w: body [%d, %d) outside the %d-byte file", ErrCorrupt, start, end, fileLen)
	}
	file := obj[:fileLen]
	if got, want := structureCRC(file, int(start), int(end), t), binary.LittleEndian.Uint32(t[24:]); got != want {
		return nil, fmt.Errorf("%w: structure checksum %#x, want %#x", ErrCorrupt, got, want)
	}
	return file, nil
}

// structureCRC is the CRC-32C of file without [start, end) and of the
// trailer's first 24 bytes.
func structureCRC(file []byte, start, end int, trailer []byte) uint32 {
	c := crc32.Update(0, castagnoli, file[:start])
	c = crc32.Update(c, castagnoli, file[end:])
	return crc32.Update(c, castagnoli, trailer[:24])
}

// bodyRange finds the span of file holding the column buffers of its
// record batch, by reading the (trusted, just written) file back without
// copying and locating the buffers in it. A batch with no buffer bytes
// has an empty span at the end of the file.
func bodyRange(file []byte) (start, end int, err error) {
	fr, err := ipc.NewMappedFileReader(file)
	if err != nil {
		return 0, 0, fmt.Errorf("arrowobj: reread: %w", err)
	}
	defer fr.Close()
	rec, err := fr.RecordBatchAt(0)
	if err != nil {
		return 0, 0, fmt.Errorf("arrowobj: reread: %w", err)
	}
	defer rec.Release()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(file)))
	found := false
	var walk func(d arrow.ArrayData)
	walk = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b == nil || b.Len() == 0 {
				continue
			}
			off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes()))) - base)
			if off < 0 || off+b.Len() > len(file) {
				continue // not in the file: a buffer the library made itself
			}
			if !found {
				start, end, found = off, off+b.Len(), true
			}
			start, end = min(start, off), max(end, off+b.Len())
		}
		for _, c := range d.Children() {
			walk(c)
		}
	}
	for _, col := range rec.Columns() {
		walk(col.Data())
	}
	if !found {
		return len(file), len(file), nil
	}
	return start, end, nil
}
