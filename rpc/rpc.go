// Package rpc is RPC over verbs: a client calls typed methods of a server
// over one RC connection, with pipelining, per-call contexts and
// timeouts. A request is either a SEND into one of the server
// connection's posted receives, or, HERD-style (ClientConfig.Herd), a
// WRITE into the connection's request region, which the server polls.
// The response is a SEND back. The server handles every request of a
// pass in turn and answers them with one post list (server-side
// batching).
//
// A response longer than the client's MaxMessage fails the client's
// connection (its receive is too short, as in ibverbs); HERD connections
// turn such a response into an ErrTooLarge error instead, since the
// server knows the client's size.
//
// Wire format of a message (request or response), little-endian:
//
//	u16 method | u16 flags (bit 0: error response) | u32 call id | payload
//
// An error response carries the handler's error text as payload, cut to
// MinMessage-Header bytes so that it fits any client's receives.
package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Header is the size of a message header.
const Header = 8

// MinMessage is the smallest MaxMessage a client or server takes: room
// for an error response, whose text is cut to MinMessage-Header bytes.
const MinMessage = 64

// DefaultMaxMessage is the largest message (header included) unless
// configured otherwise.
const DefaultMaxMessage = 4096

// Handler serves one method: req is the request payload, valid only
// during the call; it writes the response payload into resp and returns
// its length. An error is returned to the caller as a *RemoteError.
type Handler func(req, resp []byte) (int, error)

// Errors of calls.
var (
	// ErrNoMethod: the server has no handler for the method.
	ErrNoMethod = errors.New("rpc: no such method")
	// ErrTooLarge: a request or response does not fit the message size.
	ErrTooLarge = errors.New("rpc: message too large")
	// ErrClosed: the client or its connection is closed.
	ErrClosed = errors.New("rpc: closed")
)

// RemoteError is a handler's error, as the caller sees it.
type RemoteError struct {
	Method uint16
	Msg    string
}

func (e *RemoteError) Error() string { return fmt.Sprintf("rpc: method %d: %s", e.Method, e.Msg) }

const flagError = 1

func putHeader(b []byte, method, flags uint16, id uint32) {
	binary.LittleEndian.PutUint16(b, method)
	binary.LittleEndian.PutUint16(b[2:], flags)
	binary.LittleEndian.PutUint32(b[4:], id)
}

func parseHeader(b []byte) (method, flags uint16, id uint32, ok bool) {
	if len(b) < Header {
		return 0, 0, 0, false
	}
	return binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:]), binary.LittleEndian.Uint32(b[4:]), true
}

// errorResponse writes the error response to a call into out, returning
// its length.
func errorResponse(out []byte, method uint16, id uint32, err error) int {
	putHeader(out, method, flagError, id)
	return Header + copy(out[Header:MinMessage], err.Error())
}
