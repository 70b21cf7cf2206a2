package object

import "errors"

// Errors of the object store. Every layer wraps them with %w, so callers
// test with errors.Is.
var (
	// ErrNotFound: no object with the ID (never created, deleted, evicted,
	// aborted, or not sealed where a sealed one is required).
	ErrNotFound = errors.New("objstore: object not found")
	// ErrExists: Create of an ID the store already holds, sealed or being
	// created.
	ErrExists = errors.New("objstore: object already exists")
	// ErrStoreFull: not enough memory for the object even after evicting
	// every released, sealed object.
	ErrStoreFull = errors.New("objstore: store full")
	// ErrSealed: Abort or a write of an object that is already sealed, or
	// Seal twice.
	ErrSealed = errors.New("objstore: object already sealed")
	// ErrNotSealed: an operation that needs a sealed object (Release of a
	// Get reference, a transfer) met an unsealed one.
	ErrNotSealed = errors.New("objstore: object not sealed")
	// ErrInUse: Delete of an object some client still references.
	ErrInUse = errors.New("objstore: object in use")
	// ErrNotOwner: Seal or Abort by a client that did not create the
	// object, or Release of a reference the client does not hold.
	ErrNotOwner = errors.New("objstore: not this client's object")
	// ErrBadSize: a negative size, a size over the store's limit, or
	// metadata too large.
	ErrBadSize = errors.New("objstore: bad object size")
	// ErrBadID: an ID that is not 20 bytes (or 40 hex digits).
	ErrBadID = errors.New("objstore: bad object ID")
	// ErrTimeout: Get's timeout passed before the object was sealed.
	ErrTimeout = errors.New("objstore: timed out waiting for object")
	// ErrDisconnected: the store went away (stopped, killed, restarted)
	// under the client; the client must reconnect.
	ErrDisconnected = errors.New("objstore: store disconnected")
	// ErrClosed: the client or store is closed.
	ErrClosed = errors.New("objstore: closed")
	// ErrProtocol: a peer (client, store or remote store) sent something
	// no correct peer sends.
	ErrProtocol = errors.New("objstore: protocol violation")
	// ErrUnavailable: no store that was asked holds the object, or the
	// holder failed mid-transfer.
	ErrUnavailable = errors.New("objstore: object unavailable from peers")
)
