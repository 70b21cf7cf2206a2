package arrowobj

import "errors"

// Errors of the package; test with errors.Is.
var (
	// ErrCorrupt: the bytes are not one well-formed Arrow IPC file with
	// one record batch.
	ErrCorrupt = errors.New("arrowobj: corrupt Arrow object")
	// ErrShortBuffer: Write's destination is smaller than Size says the
	// record needs.
	ErrShortBuffer = errors.New("arrowobj: destination too small")
	// ErrNotArrow: the object's metadata does not mark it as an Arrow
	// object.
	ErrNotArrow = errors.New("arrowobj: not an Arrow object")
)
