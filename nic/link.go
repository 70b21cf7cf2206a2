package nic

import (
	"errors"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Link carries requests from this node to a node in another process; a
// transport implements it. The responder's node answers each RC request
// with one Response, which the transport hands to Node.HandleResponse
// with the link it arrived on.
type Link interface {
	// Address is the remote node's address.
	Address() string
	// Append queues one request for the wire. It is called with the
	// posting QP's lock held and must not block on the network; the
	// request's payload buffers are valid only during the call. It returns
	// ErrLinkFull, taking nothing, when enough is queued already; the QP
	// sends the request after a Flush. Any other error means the link is
	// dead.
	Append(r *Request) error
	// Flush sends what Append queued (one doorbell). It is called without
	// any QP lock held and may block while the network is congested.
	Flush() error
	// Progressed reports whether the link moved data either way within the
	// last d. A request is declared lost (RETRY_EXC_ERR) only when it is
	// older than its QP's retry budget and its link made no progress for
	// as long: a slow responder is not a dead one.
	Progressed(d time.Duration) bool
}

// ErrLinkFull is returned by Link.Append when the link's queue is full.
var ErrLinkFull = errors.New("nic: link queue full")

// Request is a work request on the wire, as the requester sends it and
// the responder's transport decodes it.
type Request struct {
	// SrcQPN is the requester's QP; Epoch counts its connections (it
	// changes each time the QP is connected anew) and Seq numbers its
	// requests.
	SrcQPN uint32
	Epoch  uint32
	Seq    uint32
	// DstQPN is the responder's QP.
	DstQPN     uint32
	Opcode     verbs.Opcode
	Flags      verbs.SendFlags
	RKey       uint32
	RemoteAddr uint64
	// Length is the READ length, or the payload length of WRITE and SEND.
	Length uint32
	Imm    uint32
	// Datagram marks a UD SEND: QKey applies and no response follows.
	Datagram bool
	QKey     uint32
	Atomic   verbs.AtomicArgs
	// ArgAddr and RedirectAddr are the responder addresses of a PRISM
	// INDIRECT_ARG operand and REDIRECT destination.
	ArgAddr, RedirectAddr uint64
	// Payload holds the bytes of WRITE and SEND, in order (none for an
	// INDIRECT_ARG WRITE, whose Length bytes come from ArgAddr).
	Payload [][]byte
}

// ResponseKind says what a response means.
type ResponseKind uint8

// Response kinds.
const (
	// RespAck completes the request with Status (and Data for READ and
	// atomics).
	RespAck ResponseKind = iota
	// RespRNR says the SEND or WRITE_WITH_IMM found no receive; the
	// responder discards the QP's later requests until this one is sent
	// again.
	RespRNR
	// RespDrop says the responder dropped the request unanswered: it did
	// not come from the connected peer of the QP it named (isolation.go).
	// A transport must not pass it to the requester — over tcp nothing is
	// sent — but may use it to retire the request from its own
	// bookkeeping (the shm rings carry it for that); a requester QP that
	// gets one for its oldest request on the wire fails that request at
	// its retry budget (RETRY_EXC_ERR), however busy the link.
	RespDrop
)

// Response answers one request.
type Response struct {
	Kind   ResponseKind
	Status verbs.Status
	// SrcQPN, Epoch and Seq echo the request's.
	SrcQPN uint32
	Epoch  uint32
	Seq    uint32
	// Data is the READ data or the atomic's original value.
	Data []byte
}

// Responder writes responses for requests served by Node.Serve; the
// transport implements it. Respond must copy Data before returning.
type Responder interface {
	Respond(r *Response)
}
