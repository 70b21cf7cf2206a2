package transfer

import (
	"fmt"
	"strings"

	"github.com/rdmakit/rdmakit/verbs"
)

// Protocol is how a Fetcher moves objects from a holder.
type Protocol uint8

// Protocols. The zero value is Hybrid.
const (
	// Hybrid chooses per object: READ when dataSize+metaSize >= Threshold,
	// SEND/RECV below (the thesis' corrected inequality).
	Hybrid Protocol = iota
	// SendRecv moves every object as SENDs through pre-posted receive
	// slots: one copy in user space on each side.
	SendRecv
	// Read moves every non-empty object by the READ rendezvous: the
	// holder registers the object in place, the fetcher READs it straight
	// into the object it created. No copy in user space.
	Read
	// TCP4K is Plasma's original socket path: plain TCP, each write and
	// read at most 4096 bytes, straight from and into the objects.
	TCP4K
	// TCPBulk is plain TCP with one write of the whole object and one
	// io.ReadFull into the created object, over large socket buffers.
	TCPBulk
	numProtocols
)

var protocolNames = [...]string{"hybrid", "sendrecv", "read", "tcp4k", "tcpbulk"}

// String returns the protocol's name as ParseProtocol reads it: "hybrid",
// "sendrecv", "read", "tcp4k" or "tcpbulk".
func (p Protocol) String() string {
	if p < numProtocols {
		return protocolNames[p]
	}
	return fmt.Sprintf("Protocol(%d)", uint8(p))
}

// Verbs reports whether the protocol runs over a verbs QP (Hybrid,
// SendRecv, Read) rather than plain TCP.
func (p Protocol) Verbs() bool { return p <= Read }

// Protocols returns every protocol, in the order of their values.
func Protocols() []Protocol { return []Protocol{Hybrid, SendRecv, Read, TCP4K, TCPBulk} }

// ParseProtocol reads a protocol name (case-insensitive; "send-recv",
// "twosided", "onesided" and "4k" are accepted too).
func ParseProtocol(s string) (Protocol, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "hybrid", "":
		return Hybrid, nil
	case "sendrecv", "send-recv", "send/recv", "twosided", "two-sided":
		return SendRecv, nil
	case "read", "onesided", "one-sided":
		return Read, nil
	case "tcp4k", "tcp-4k", "4k", "socket":
		return TCP4K, nil
	case "tcpbulk", "tcp-bulk", "bulk":
		return TCPBulk, nil
	}
	return 0, fmt.Errorf("%w: protocol %q (want hybrid, sendrecv, read, tcp4k or tcpbulk)", verbs.ErrInvalidArg, s)
}

// choose is the protocol a holder uses for an object of total bytes when
// the fetcher asked for mode with threshold: the hybrid's rule is
// total >= threshold → Read. An empty object always goes as SendRecv (a
// DATA message and nothing else).
func choose(mode Protocol, threshold uint64, total uint64) Protocol {
	switch {
	case total == 0:
		return SendRecv
	case mode == Read:
		return Read
	case mode == Hybrid && total >= threshold:
		return Read
	}
	return SendRecv
}
