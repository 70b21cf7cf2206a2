package cm

import "errors"

// Errors returned by the package. Errors are wrapped with context; test
// them with errors.Is.
var (
	// ErrRejected: the peer refused the connection. The error is a
	// *RejectedError carrying the peer's reason.
	ErrRejected = errors.New("cm: connection rejected")
	// ErrProtocol: the peer sent something that is not a valid exchange
	// message (bad magic, unsupported version, bad lengths, unexpected
	// message), or reported that we did.
	ErrProtocol = errors.New("cm: protocol error")
	// ErrPrivateDataTooLarge: Options.PrivateData is longer than
	// MaxPrivateData.
	ErrPrivateDataTooLarge = errors.New("cm: private data too large")
	// ErrClosed: the listener has been closed.
	ErrClosed = errors.New("cm: listener closed")
	// ErrAnswered: Accept or Reject was called on a Request that has
	// already been accepted or rejected.
	ErrAnswered = errors.New("cm: request already answered")
)

// RejectedError is returned when the peer refuses a connection: the
// listener's application called Request.Reject, the listener could not set
// up its side (e.g. it failed to create a QP), it shut down, or — seen
// from Request.Accept — the dialer failed to finish its side. It matches
// ErrRejected with errors.Is.
type RejectedError struct {
	// Reason is the text the peer gave.
	Reason string
}

// Error implements error.
func (e *RejectedError) Error() string { return "cm: connection rejected: " + e.Reason }

// Is makes errors.Is(err, ErrRejected) true.
func (e *RejectedError) Is(target error) bool { return target == ErrRejected }
