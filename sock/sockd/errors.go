package sockd

import (
	"errors"
	"fmt"
)

var (
	// ErrDenied means the allow-list refused a connection.
	ErrDenied = errors.New("sockd: denied by the allow-list")
	// ErrQuota means an application's quota (connections, listeners or
	// window memory) is used up.
	ErrQuota = errors.New("sockd: quota exceeded")
	// ErrFull means one of the daemon's tables (listeners, applications,
	// sessions) is full.
	ErrFull = errors.New("sockd: table full")
	// ErrNotRegistered means a listener asked to admit a connection without
	// being registered (or after its registration ended: the daemon
	// restarted).
	ErrNotRegistered = errors.New("sockd: listener not registered")
	// ErrConflict means another listener registered the same address.
	ErrConflict = errors.New("sockd: address already registered")
	// ErrProtocol means a peer sent a malformed or unexpected message.
	ErrProtocol = errors.New("sockd: protocol violation")
	// ErrVersion means the peer speaks another protocol version.
	ErrVersion = errors.New("sockd: protocol version mismatch")
	// ErrPolicy means a policy file is malformed.
	ErrPolicy = errors.New("sockd: invalid policy")
)

// codeErrors maps ERROR codes to the errors they stand for.
var codeErrors = map[uint8]error{
	codeBad:           ErrProtocol,
	codeVersion:       ErrVersion,
	codeDenied:        ErrDenied,
	codeQuota:         ErrQuota,
	codeFull:          ErrFull,
	codeNotRegistered: ErrNotRegistered,
	codeConflict:      ErrConflict,
}

// errorCode is the ERROR code that carries err.
func errorCode(err error) uint8 {
	for code, e := range codeErrors {
		if errors.Is(err, e) {
			return code
		}
	}
	return codeBad
}

// RemoteError is an error the daemon answered with: its text is the
// daemon's, and it wraps the sentinel of its kind (ErrDenied, ErrQuota …).
type RemoteError struct {
	Kind error  // ErrDenied, ErrQuota, ErrFull, …
	Text string // the daemon's explanation
}

// Error returns the daemon's explanation.
func (e *RemoteError) Error() string { return e.Text }

// Unwrap returns the error's kind.
func (e *RemoteError) Unwrap() error { return e.Kind }

// replyError turns an ERROR reply into the error it carries.
func replyError(m msg) error {
	e, ok := codeErrors[m.code]
	if !ok {
		e = ErrProtocol
	}
	if m.text == "" {
		m.text = fmt.Sprintf("sockd: error code %d", m.code)
	}
	return &RemoteError{Kind: e, Text: m.text}
}
