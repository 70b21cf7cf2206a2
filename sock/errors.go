package sock

import (
	"errors"
	"syscall"
)

var (
	// ErrProtocol means a peer broke the protocol: a malformed record,
	// control entry or control message. The link to that peer fails; no
	// other link is affected.
	ErrProtocol = errors.New("sock: protocol violation")
	// ErrInvalidConfig is returned for a Config or URI that cannot work.
	ErrInvalidConfig = errors.New("sock: invalid configuration")
	// ErrRefused means the listener refused the connection (its backlog is
	// full, it is closing, or sockd's quota or allow-list said no). It
	// wraps syscall.ECONNREFUSED.
	ErrRefused = &refusedError{}
	// ErrReset means the connection was reset: the peer closed it with
	// unread data, or the peer process died or the link to it failed. It
	// wraps syscall.ECONNRESET.
	ErrReset = &resetError{}
	// ErrNoEndpoint means nothing listens at the address.
	ErrNoEndpoint = errors.New("sock: no endpoint at this address")
)

type refusedError struct{}

func (*refusedError) Error() string        { return "sock: connection refused" }
func (*refusedError) Unwrap() error        { return syscall.ECONNREFUSED }
func (*refusedError) Is(target error) bool { return target == ErrRefused }

type resetError struct{}

func (*resetError) Error() string        { return "sock: connection reset" }
func (*resetError) Unwrap() error        { return syscall.ECONNRESET }
func (*resetError) Is(target error) bool { return target == ErrReset }
