package verbs

import (
	"fmt"
	"time"
)

// QPType is the transport service of a queue pair.
type QPType uint8

// Queue-pair types.
const (
	// RC is the reliable connected service: one peer, in-order, every
	// opcode.
	RC QPType = iota + 1
	// UD is the unreliable datagram service: SEND and SEND_WITH_IMM only,
	// at most the device MTU per message, to any QP addressed by an AH.
	UD
)

// String returns "RC" or "UD".
func (t QPType) String() string {
	switch t {
	case RC:
		return "RC"
	case UD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPState is the state of a queue pair.
type QPState uint8

// Queue-pair states. Transitions: RESET → INIT → RTR → RTS; any state →
// RESET or ERROR; INIT → INIT and RTS → RTS (attribute changes).
const (
	StateReset QPState = iota // RESET: created, not usable
	StateInit                 // INIT: receives may be posted
	StateRTR                  // RTR: ready to receive
	StateRTS                  // RTS: ready to send
	StateError                // ERROR: every posted and new request is flushed
)

// String returns the ibverbs state name.
func (s QPState) String() string {
	switch s {
	case StateReset:
		return "RESET"
	case StateInit:
		return "INIT"
	case StateRTR:
		return "RTR"
	case StateRTS:
		return "RTS"
	case StateError:
		return "ERROR"
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// ValidTransition reports whether a QP may move from state from to state
// to with Modify.
func ValidTransition(from, to QPState) bool {
	if to == StateReset || to == StateError {
		return true
	}
	switch from {
	case StateReset:
		return to == StateInit
	case StateInit:
		return to == StateInit || to == StateRTR
	case StateRTR:
		return to == StateRTS
	case StateRTS:
		return to == StateRTS
	}
	return false
}

// QPCap are the queue sizes and limits of a QP.
type QPCap struct {
	// MaxSendWR is the send-queue depth. A request holds its slot until a
	// completion at or after it is polled, so unsignaled requests are
	// freed only by a later signaled one: signal at least once every
	// MaxSendWR requests or posting fails with ErrQueueFull.
	MaxSendWR     int
	MaxRecvWR     int // receive-queue depth (ignored with an SRQ)
	MaxSendSGE    int // scatter/gather entries per send work request
	MaxRecvSGE    int // scatter/gather entries per receive work request
	MaxInlineData int // bytes an INLINE work request may carry
}

// QPInitAttr configures CreateQP.
type QPInitAttr struct {
	Type   QPType
	SendCQ CQ
	RecvCQ CQ
	// SRQ, when set, is the source of receives instead of the QP's own
	// receive queue.
	SRQ SRQ
	Cap QPCap
	// SignalAll completes every send work request, as if each had
	// FlagSignaled (ibverbs' sq_sig_all).
	SignalAll bool
	// SingleThreaded promises that one goroutine at a time posts send
	// work requests to the QP (ibverbs' thread domain, ibv_alloc_td), so
	// a provider may keep its send side free of locks on the common
	// path. Providers that cannot use the hint ignore it. rdmakit's own
	// providers stay correct if the promise is broken (a second poster
	// takes the locked path), only slower; see docs/verbs.md.
	SingleThreaded bool
}

// Defaults used by CreateQP for zero QPCap fields and by Modify for zero
// QPAttr fields.
const (
	DefaultMaxWR         = 1024
	DefaultMaxSGE        = 4
	DefaultMaxInlineData = 64
	DefaultRNRRetry      = 6 // bounded, so a missing receive surfaces as RNR_RETRY_EXC_ERR
	DefaultRetryCount    = 7
	DefaultMinRNRTimer   = time.Millisecond
	DefaultTimeout       = 64 * time.Millisecond // ibverbs timeout 14 ≈ 67 ms: about half a second with the retries
	InfiniteRNRRetry     = 7                     // as QPAttr.RNRRetry: retry forever, as in ibverbs
)

// QPAttr are the attributes set by QP.Modify. State is the state to move
// to; the other fields are read by the transitions that need them and
// ignored otherwise; zero values take the defaults above.
type QPAttr struct {
	// State is the target state.
	State QPState
	// Access (INIT) is what the responder side of this QP allows peers to
	// do: AccessRemoteRead, AccessRemoteWrite, AccessRemoteAtomic
	// (ibverbs' qp_access_flags). A remote operation needs the flag on both
	// the MR and the QP.
	Access Access
	// QKey (INIT, UD) is the queue key a UD SEND must carry to be accepted.
	QKey uint32
	// Dest and DestQPN (RTR, RC) name the peer QP: the peer device's
	// Address() and its QP number.
	Dest    string
	DestQPN uint32
	// MinRNRTimer (RTR) is how long the requester waits before retrying a
	// SEND that found no posted receive.
	MinRNRTimer time.Duration
	// RNRRetry (RTS) is how many times a SEND that found no posted receive
	// is retried, MinRNRTimer apart, before completing with
	// StatusRNRRetryExcErr; InfiniteRNRRetry (7) retries forever, zero
	// takes DefaultRNRRetry, NoRNRRetry means no retry.
	RNRRetry int
	// RetryCount (RTS) and Timeout (RTS) bound how long a request waits for
	// an unreachable responder: after Timeout×(RetryCount+1) it completes
	// with StatusRetryExcErr.
	RetryCount int
	Timeout    time.Duration
}

// NoRNRRetry, as QPAttr.RNRRetry, means "do not retry" (a zero RNRRetry
// takes the default).
const NoRNRRetry = -1
