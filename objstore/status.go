package objstore

import (
	"context"
	"errors"
	"fmt"
)

// errCanceled is the status of a request the client cancelled.
var errCanceled = context.Canceled

// statuses are the errors a reply's status byte names: status i means
// statuses[i] (0: success). The table is part of the wire format: only
// append to it.
var statuses = []error{
	nil,
	ErrNotFound, ErrExists, ErrStoreFull, ErrSealed, ErrNotSealed, ErrInUse,
	ErrNotOwner, ErrBadSize, ErrBadID, ErrTimeout, ErrDisconnected, ErrClosed,
	ErrProtocol, ErrUnavailable, ErrBusy, context.Canceled, context.DeadlineExceeded,
}

// statusOf is err's status byte. An error none of the table matches (a
// Fetcher's own) is sent as ErrUnavailable.
func statusOf(err error) byte {
	if err == nil {
		return 0
	}
	for i, e := range statuses[1:] {
		if errors.Is(err, e) {
			return byte(i + 1)
		}
	}
	return statusOf(ErrUnavailable)
}

// errorOf is the error a status byte names; what names none is
// ErrProtocol.
func errorOf(status byte) error {
	if status == 0 {
		return nil
	}
	if int(status) >= len(statuses) {
		return fmt.Errorf("%w: unknown status %d", ErrProtocol, status)
	}
	return statuses[status]
}

// statusReply is a reply frame to request (typ, reqID) carrying only the
// status of err.
func statusReply(typ byte, reqID uint32, err error) []byte {
	return newFrame(nil, typ|replyBit, reqID).u8(statusOf(err)).done()
}
