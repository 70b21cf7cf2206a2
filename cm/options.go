package cm

import (
	"errors"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Options configure the QP one side of an exchange creates and the private
// data it sends. Zero values of the QP attributes take the verbs defaults.
type Options struct {
	// PD is the protection domain the QP is created in. Required.
	PD verbs.PD
	// SendCQ and RecvCQ receive the QP's completions; they may be the
	// same CQ. Required.
	SendCQ, RecvCQ verbs.CQ
	// SRQ, when set, is the QP's source of receives.
	SRQ verbs.SRQ
	// Cap sizes the QP's queues.
	Cap verbs.QPCap
	// SignalAll completes every send work request (sq_sig_all).
	SignalAll bool
	// SingleThreaded creates the QP with QPInitAttr.SingleThreaded: one
	// goroutine at a time posts to it.
	SingleThreaded bool
	// Access is what the peer may do through this QP
	// (verbs.AccessRemoteRead, AccessRemoteWrite, AccessRemoteAtomic), set
	// at INIT. Zero allows SEND only.
	Access verbs.Access
	// PrivateData is sent to the peer, at most MaxPrivateData bytes; see
	// EncodeDescs.
	PrivateData []byte
	// MinRNRTimer (RTR), RNRRetry, RetryCount and Timeout (RTS) are
	// passed to QP.Modify; see verbs.QPAttr.
	MinRNRTimer time.Duration
	RNRRetry    int
	RetryCount  int
	Timeout     time.Duration
	// Prepare, when set, is called with the new QP in INIT, before this
	// side tells the peer the QP exists (the dialer's REQ, the listener's
	// REP), so that the peer never sends before it has run: post the
	// receives of the first messages here (rpc.Server.Attach), or a SEND
	// arriving before they are posted costs the peer RNR retries. An
	// error fails the exchange; the QP is destroyed, and what Prepare made
	// is the caller's to free.
	Prepare func(qp verbs.QP) error
}

// check validates the options before anything is created.
func (o *Options) check() error {
	if o.PD == nil || o.SendCQ == nil || o.RecvCQ == nil {
		return fmt.Errorf("cm: Options need PD, SendCQ and RecvCQ: %w", verbs.ErrInvalidArg)
	}
	if len(o.PrivateData) > MaxPrivateData {
		return fmt.Errorf("%w: %d bytes (max %d): %w", ErrPrivateDataTooLarge, len(o.PrivateData), MaxPrivateData, verbs.ErrInvalidArg)
	}
	if err := o.Access.Validate(); err != nil {
		return fmt.Errorf("cm: Options.Access %v: %w", o.Access, err)
	}
	return nil
}

// createQP creates an RC QP, moves it to INIT with o.Access and runs
// o.Prepare on it.
func (o *Options) createQP() (verbs.QP, error) {
	qp, err := o.PD.CreateQP(verbs.QPInitAttr{
		Type:           verbs.RC,
		SendCQ:         o.SendCQ,
		RecvCQ:         o.RecvCQ,
		SRQ:            o.SRQ,
		Cap:            o.Cap,
		SignalAll:      o.SignalAll,
		SingleThreaded: o.SingleThreaded,
	})
	if err != nil {
		return nil, fmt.Errorf("cm: create QP: %w", err)
	}
	if err := qp.Modify(verbs.QPAttr{State: verbs.StateInit, Access: o.Access}); err != nil {
		return nil, errors.Join(fmt.Errorf("cm: QP → INIT: %w", err), destroy(qp))
	}
	if o.Prepare != nil {
		if err := o.Prepare(qp); err != nil {
			return nil, errors.Join(fmt.Errorf("cm: preparing QP %d: %w", qp.QPN(), err), destroy(qp))
		}
	}
	return qp, nil
}

// connect moves qp from INIT to RTS, connected to the QP destQPN of the
// device at dest.
func (o *Options) connect(qp verbs.QP, dest string, destQPN uint32) error {
	if err := qp.Modify(verbs.QPAttr{State: verbs.StateRTR, Dest: dest, DestQPN: destQPN, MinRNRTimer: o.MinRNRTimer}); err != nil {
		return fmt.Errorf("cm: QP → RTR (peer %s QPN %d): %w", dest, destQPN, err)
	}
	if err := qp.Modify(verbs.QPAttr{State: verbs.StateRTS, RNRRetry: o.RNRRetry, RetryCount: o.RetryCount, Timeout: o.Timeout}); err != nil {
		return fmt.Errorf("cm: QP → RTS: %w", err)
	}
	return nil
}

// destroy destroys a QP the exchange created and failed to hand over.
func destroy(qp verbs.QP) error {
	if err := qp.Destroy(); err != nil {
		return fmt.Errorf("cm: destroy QP %d: %w", qp.QPN(), err)
	}
	return nil
}
