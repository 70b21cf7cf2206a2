package remotedev

import (
	"context"
	"errors"

	"github.com/rdmakit/rdmakit/verbs"
)

// op is the verbs call a request asks for.
type op uint8

const (
	opOpen op = iota + 1
	opDevClose
	opDevAllocPD
	opDevCreateCQ
	opDevCrash
	opPDAllocMR
	opPDCreateQP
	opPDCreateSRQ
	opPDCreateAH
	opPDCreateAHFromWC
	opPDDealloc
	opMRDeregister
	opMRPostFree
	opMRFreeLen
	opMRQuiesce
	opCQPoll
	opCQReqNotify
	opCQWait
	opCQDestroy
	opQPState
	opQPModify
	opQPPostSend
	opQPPostRecv
	opQPDestroy
	opSRQPostRecv
	opSRQDestroy
	opCancel // cancel the call whose ID is in Target
)

// Special handles: 0 is a nil object, foreign an object that is not a proxy
// of this connection (the server substitutes an object no device accepts).
const (
	nilHandle     uint64 = 0
	foreignHandle uint64 = ^uint64(0)
)

// request is one call, client to server.
type request struct {
	ID     uint64 // call identity, echoed in the response
	Op     op
	Target uint64 // handle of the object called (or call ID for opCancel)

	N, M     int          // sizes: MR size, CQ depth, SRQ maxWR/maxSGE, poll count
	Access   verbs.Access // AllocMR
	Bool     bool         // ReqNotify solicitedOnly
	Str      string       // Open URI, CreateAH address
	Deadline int64        // Wait: unix nanoseconds, 0 for none
	QPInit   *wireQPInit
	QPAttr   *verbs.QPAttr
	Send     []wireSendWR
	Recv     []verbs.RecvWR
	WC       *verbs.WC
	Addrs    []uint64 // MR PostFree buffers
}

// wireQPInit is verbs.QPInitAttr with handles for the CQs and the SRQ.
type wireQPInit struct {
	Type      verbs.QPType
	SendCQ    uint64
	RecvCQ    uint64
	SRQ       uint64
	Cap       verbs.QPCap
	SignalAll bool
}

// wireSendWR is verbs.SendWR with a handle for the AH.
type wireSendWR struct {
	ID         uint64
	Opcode     verbs.Opcode
	Flags      verbs.SendFlags
	SGL        []verbs.SGE
	Imm        uint32
	RemoteAddr uint64
	RKey       uint32
	Atomic     verbs.AtomicArgs
	ArgAddr    uint64
	Redirect   uint64
	RemoteLen  uint32
	Queue      uint32
	AH         uint64
	RemoteQPN  uint32
	RemoteQKey uint32
}

// response is the answer to one call, server to client.
type response struct {
	ID  uint64
	Err *wireError

	Handle uint64 // the object created
	Str    string // device or AH address
	ID32   uint32 // device ID, QPN, MR lkey
	Key    uint32 // MR rkey
	Addr   uint64 // MR address
	N      int    // MR length, CQ depth, polled count
	Attr   verbs.DeviceAttr
	State  verbs.QPState
	Type   verbs.QPType
	Access verbs.Access
	WCs    []verbs.WC
	FDs    int // file descriptors passed with the response (SCM_RIGHTS)
}

// wireError is an error of the server's call.
type wireError struct {
	Msg       string  // the server's error text
	Codes     []uint8 // indexes into sentinels of every sentinel the error matches
	PostIndex int     // the *verbs.PostError index, when IsPost
	IsPost    bool
}

// sentinels are the errors whose identity survives the trip: the server
// records which of them its error matches, the client's error matches the
// same ones.
var sentinels = []error{
	verbs.ErrUnknownScheme,
	verbs.ErrBadURI,
	verbs.ErrClosed,
	verbs.ErrInvalidArg,
	verbs.ErrInvalidState,
	verbs.ErrInvalidTransition,
	verbs.ErrQueueFull,
	verbs.ErrNotSupported,
	verbs.ErrBusy,
	verbs.ErrCQOverrun,
	verbs.ErrTooManySGE,
	verbs.ErrInlineTooLarge,
	verbs.ErrAccess,
	verbs.ErrNoMemory,
	verbs.ErrTimeout,
	context.Canceled,
	context.DeadlineExceeded,
}

// encodeError turns a server-side error into its wire form; nil stays nil.
func encodeError(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Msg: err.Error()}
	cause := err
	var pe *verbs.PostError
	if errors.As(err, &pe) {
		w.IsPost, w.PostIndex = true, pe.Index
		if pe.Err != nil {
			cause = pe.Err
			w.Msg = pe.Err.Error()
		}
	}
	for i, s := range sentinels {
		if errors.Is(cause, s) {
			w.Codes = append(w.Codes, uint8(i))
		}
	}
	return w
}

// decode rebuilds the error on the client.
func (w *wireError) decode() error {
	if w == nil {
		return nil
	}
	e := &RemoteError{Msg: w.Msg}
	for _, c := range w.Codes {
		if int(c) < len(sentinels) {
			e.sentinels = append(e.sentinels, sentinels[c])
		}
	}
	if w.IsPost {
		return &verbs.PostError{Index: w.PostIndex, Err: e}
	}
	return e
}

// RemoteError is an error returned by a call executed in the server
// process. Its text is the server's; it matches (errors.Is) the same verbs
// sentinels and context errors the server's error matched.
type RemoteError struct {
	// Msg is the server's error text.
	Msg       string
	sentinels []error
}

// Error implements error.
func (e *RemoteError) Error() string { return "remotedev: " + e.Msg }

// Unwrap returns the sentinels the server's error matched.
func (e *RemoteError) Unwrap() []error { return e.sentinels }
