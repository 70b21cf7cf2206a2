package verbs

import (
	"errors"
	"fmt"
)

// Errors returned synchronously by the verbs API (at open, create, modify
// or post time). Completions report failures with a Status instead.
var (
	// ErrUnknownScheme: Open was given a URI whose scheme no provider has
	// registered.
	ErrUnknownScheme = errors.New("verbs: unknown device scheme")
	// ErrBadURI: a device URI could not be parsed or names no device.
	ErrBadURI = errors.New("verbs: bad device URI")
	// ErrClosed: the device, or the object's device, has been closed.
	ErrClosed = errors.New("verbs: closed")
	// ErrInvalidArg: an argument is out of range or inconsistent.
	ErrInvalidArg = errors.New("verbs: invalid argument")
	// ErrInvalidState: the object is in a state that does not allow the
	// call, e.g. posting a send to a QP that is not in RTS.
	ErrInvalidState = errors.New("verbs: invalid state")
	// ErrInvalidTransition: QP.Modify was asked for a state transition that
	// the QP state machine does not have.
	ErrInvalidTransition = errors.New("verbs: invalid QP state transition")
	// ErrQueueFull: the send queue, receive queue or SRQ has no free slot.
	ErrQueueFull = errors.New("verbs: queue full")
	// ErrNotSupported: the opcode, flag or feature is not supported by the
	// device or the QP type.
	ErrNotSupported = errors.New("verbs: not supported")
	// ErrBusy: the object is still in use (e.g. destroying a CQ that QPs
	// still use, or deallocating a PD that has MRs).
	ErrBusy = errors.New("verbs: resource busy")
	// ErrCQOverrun: a completion was generated while the CQ was full. The
	// completion is lost, the QP that generated it moves to ERROR and the CQ
	// reports this error from Poll from then on.
	ErrCQOverrun = errors.New("verbs: completion queue overrun")
	// ErrTooManySGE: a work request has more scatter/gather entries than
	// the QP allows.
	ErrTooManySGE = errors.New("verbs: too many scatter/gather entries")
	// ErrInlineTooLarge: an INLINE work request carries more bytes than the
	// QP's MaxInlineData.
	ErrInlineTooLarge = errors.New("verbs: inline data too large")
	// ErrAccess: an access-flag combination is not allowed (ibverbs requires
	// LocalWrite with RemoteWrite or RemoteAtomic).
	ErrAccess = errors.New("verbs: invalid access flags")
	// ErrNoMemory: memory for a region could not be allocated.
	ErrNoMemory = errors.New("verbs: cannot allocate memory")
	// ErrTimeout: a blocking call's deadline passed.
	ErrTimeout = errors.New("verbs: timeout")
)

// PostError reports which work request of a post list was rejected. The
// requests before Index were posted and will complete; Index and later
// ones were not posted (ibverbs' bad_wr).
type PostError struct {
	Index int   // index of the first rejected work request
	Err   error // why it was rejected; wraps one of the Err* sentinels
}

// Error implements error.
func (e *PostError) Error() string {
	return fmt.Sprintf("verbs: post rejected at work request %d: %v", e.Index, e.Err)
}

// Unwrap returns the cause.
func (e *PostError) Unwrap() error { return e.Err }
