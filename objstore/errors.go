package objstore

import (
	"errors"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// ID names an object: 20 bytes, chosen by the client that creates it.
type ID = object.ID

// NewID returns a random ID.
func NewID() ID { return object.NewID() }

// ParseID reads an ID written by ID.String (40 hex digits).
func ParseID(s string) (ID, error) { return object.ParseID(s) }

// The errors of package object, under the names this package's callers
// use; test with errors.Is.
var (
	// ErrNotFound: no sealed object with the ID.
	ErrNotFound = object.ErrNotFound
	// ErrExists: Create of an ID the store already holds.
	ErrExists = object.ErrExists
	// ErrStoreFull: no room even after evicting every evictable object.
	ErrStoreFull = object.ErrStoreFull
	// ErrSealed: Abort of a sealed object, or Seal twice.
	ErrSealed = object.ErrSealed
	// ErrNotSealed: an operation that needs a sealed object met an
	// unsealed one.
	ErrNotSealed = object.ErrNotSealed
	// ErrInUse: Delete of a referenced, pinned or unsealed object.
	ErrInUse = object.ErrInUse
	// ErrNotOwner: Seal or Abort by a client that did not create the
	// object, or Release of a reference the client does not hold.
	ErrNotOwner = object.ErrNotOwner
	// ErrBadSize: a negative size, a size over the limit, or metadata too
	// large.
	ErrBadSize = object.ErrBadSize
	// ErrBadID: an ID that is not 20 bytes.
	ErrBadID = object.ErrBadID
	// ErrTimeout: a wait ended before the object was sealed.
	ErrTimeout = object.ErrTimeout
	// ErrDisconnected: the store went away under the client.
	ErrDisconnected = object.ErrDisconnected
	// ErrClosed: the client or store is closed.
	ErrClosed = object.ErrClosed
	// ErrProtocol: the peer sent something no correct peer sends.
	ErrProtocol = object.ErrProtocol
	// ErrUnavailable: no peer could provide the object.
	ErrUnavailable = object.ErrUnavailable
)

// ErrLagged ends a Subscription whose reader fell more than
// SubscriptionBuffer IDs behind: the store dropped it rather than wait.
var ErrLagged = errors.New("objstore: subscriber lagged and was dropped")

// ErrBusy: the client has too many requests outstanding at the store
// (MaxOutstanding).
var ErrBusy = errors.New("objstore: too many outstanding requests")
