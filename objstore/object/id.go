package object

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// IDSize is the length of an object ID in bytes: a SHA-1 hash, as Plasma
// and Ray have it.
const IDSize = 20

// ID names an object. IDs are chosen by the client that creates the
// object (a hash of its content, a task's output name, or NewID).
type ID [IDSize]byte

// NewID returns a random ID.
func NewID() ID {
	var id ID
	if _, err := rand.Read(id[:]); err != nil {
		panic("object: crypto/rand failed: " + err.Error()) // never on Linux
	}
	return id
}

// String is the ID in lower-case hex (40 characters).
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID reads an ID written by String.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*IDSize {
		return id, fmt.Errorf("%w: object ID %q is not %d hex digits", ErrBadID, s, 2*IDSize)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("%w: object ID %q: %v", ErrBadID, s, err)
	}
	return id, nil
}
