package verbs

import "fmt"

// Status is the outcome of a work request, as reported in a WC. The values
// and their meanings follow ibverbs' enum ibv_wc_status.
type Status uint8

// Completion statuses.
const (
	// StatusSuccess: the work request completed.
	StatusSuccess Status = iota
	// StatusLocLenErr: a local length error, e.g. a received message larger
	// than the posted receive buffer, or an atomic result buffer of the wrong
	// size.
	StatusLocLenErr
	// StatusLocQPOpErr: an internal consistency error of the local QP.
	StatusLocQPOpErr
	// StatusLocProtErr: a local protection error: an lkey that names no MR,
	// an MR of another PD, an SGE outside its MR, or an MR without local
	// write access used as a destination.
	StatusLocProtErr
	// StatusWRFlushErr: the work request was flushed because the QP was in
	// the ERROR state.
	StatusWRFlushErr
	// StatusMWBindErr is reserved for memory-window binding errors.
	StatusMWBindErr
	// StatusBadRespErr: the responder returned an unexpected response.
	StatusBadRespErr
	// StatusLocAccessErr: a local access error.
	StatusLocAccessErr
	// StatusRemInvReqErr: the responder rejected the request as invalid:
	// a misaligned atomic, a message larger than the receive buffer, an
	// opcode the responder QP does not accept.
	StatusRemInvReqErr
	// StatusRemAccessErr: a remote access error: unknown or deregistered
	// rkey, an address outside the MR, a missing remote access flag on the
	// MR or the responder QP, or an MR of another PD than the responder QP.
	StatusRemAccessErr
	// StatusRemOpErr: the responder could not complete the operation.
	StatusRemOpErr
	// StatusRetryExcErr: the transport retry counter was exceeded: the
	// responder is dead, partitioned away or did not answer in time.
	StatusRetryExcErr
	// StatusRNRRetryExcErr: the receiver-not-ready retry counter was
	// exceeded: no receive was posted at the responder.
	StatusRNRRetryExcErr
	// StatusLocRDDViolErr is reserved (reliable datagram domains).
	StatusLocRDDViolErr
	// StatusRemInvRDReqErr is reserved (reliable datagram).
	StatusRemInvRDReqErr
	// StatusRemAbortErr: the responder aborted the operation.
	StatusRemAbortErr
	// StatusInvEECNErr is reserved (reliable datagram).
	StatusInvEECNErr
	// StatusInvEECStateErr is reserved (reliable datagram).
	StatusInvEECStateErr
	// StatusFatalErr: a fatal error of the device.
	StatusFatalErr
	// StatusRespTimeoutErr: the response timed out.
	StatusRespTimeoutErr
	// StatusGeneralErr: any other error.
	StatusGeneralErr
	// StatusSkipped: a CONDITIONAL work request (PRISM chaining) did not
	// run because the one before it on its QP did not succeed (failed, was
	// skipped, or was a compare-and-swap whose comparison did not hold).
	// It is not an error: the QP stays usable, and like a success it
	// completes only when signaled.
	StatusSkipped
	numStatus
)

var statusNames = [...]string{
	StatusSuccess:        "SUCCESS",
	StatusLocLenErr:      "LOC_LEN_ERR",
	StatusLocQPOpErr:     "LOC_QP_OP_ERR",
	StatusLocProtErr:     "LOC_PROT_ERR",
	StatusWRFlushErr:     "WR_FLUSH_ERR",
	StatusMWBindErr:      "MW_BIND_ERR",
	StatusBadRespErr:     "BAD_RESP_ERR",
	StatusLocAccessErr:   "LOC_ACCESS_ERR",
	StatusRemInvReqErr:   "REM_INV_REQ_ERR",
	StatusRemAccessErr:   "REM_ACCESS_ERR",
	StatusRemOpErr:       "REM_OP_ERR",
	StatusRetryExcErr:    "RETRY_EXC_ERR",
	StatusRNRRetryExcErr: "RNR_RETRY_EXC_ERR",
	StatusLocRDDViolErr:  "LOC_RDD_VIOL_ERR",
	StatusRemInvRDReqErr: "REM_INV_RD_REQ_ERR",
	StatusRemAbortErr:    "REM_ABORT_ERR",
	StatusInvEECNErr:     "INV_EECN_ERR",
	StatusInvEECStateErr: "INV_EEC_STATE_ERR",
	StatusFatalErr:       "FATAL_ERR",
	StatusRespTimeoutErr: "RESP_TIMEOUT_ERR",
	StatusGeneralErr:     "GENERAL_ERR",
	StatusSkipped:        "WR_SKIPPED",
}

// Valid reports whether s is a status this package defines.
func (s Status) Valid() bool { return s < numStatus }

// String returns the ibverbs name of the status, e.g. "REM_ACCESS_ERR".
func (s Status) String() string {
	if s < numStatus {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Err returns nil for StatusSuccess and a *StatusError otherwise, so a
// completion can be checked with errors.Is against the Err* sentinels of
// this package or against another StatusError.
func (s Status) Err() error {
	if s == StatusSuccess {
		return nil
	}
	return &StatusError{Status: s}
}

// StatusError is the error form of a failed completion.
type StatusError struct {
	Status Status
}

// Error implements error.
func (e *StatusError) Error() string { return "verbs: completion " + e.Status.String() }

// Is reports whether target is a *StatusError with the same status.
func (e *StatusError) Is(target error) bool {
	t, ok := target.(*StatusError)
	return ok && t.Status == e.Status
}
