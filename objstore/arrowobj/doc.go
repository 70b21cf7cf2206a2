// Package arrowobj puts Apache Arrow record batches into object-store
// objects and reads them back without copying — Plasma's main use in Ray:
// a task writes its output table once into shared memory and every reader
// on the node maps the same bytes.
//
// # Layout
//
// An object holds one record batch in the Arrow IPC file format
// (https://arrow.apache.org/docs/format/Columnar.html#ipc-file-format),
// then a 40-byte trailer:
//
//	"ARROW1\0\0" | schema message | record batch message (metadata, body) | footer | footer length | "ARROW1" | trailer
//
// The body's buffers start at 8-byte aligned offsets. The trailer
// (trailer.go) holds a CRC-32C over everything but the column bodies.
// The object's data without its last 40 bytes is a standard Arrow file
// any Arrow implementation reads. The object's metadata is the eight
// bytes of Magic, so a reader can tell an Arrow object from any other.
//
// # Zero copy
//
// Read parses the footer and the flatbuffer metadata and builds the
// arrays over sub-slices of the object's bytes: the column buffers alias
// the store's shared memory. The record is valid only while the object is
// held (GetRecord's release function ends that). Writing copies each
// column buffer once, from the Go heap into the object, as any put must.
//
// Read copies nothing, but it does read: the validation below scans the
// offsets of variable-length columns, the bytes of string columns (UTF-8)
// and validity bitmaps. Fixed-width columns without nulls cost nothing
// per row.
//
// # Bad input
//
// Read never panics on a corrupted object: it checks the trailer's CRC
// before the Arrow library parses anything (the library trusts the
// lengths in its flatbuffers), validates every column against its
// buffers (lengths, offsets, null counts, children), and turns any panic
// of the library into an error wrapping ErrCorrupt. The CRC guards
// against corruption, not against a forger who recomputes it.
package arrowobj
