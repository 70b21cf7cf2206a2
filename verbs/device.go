package verbs

import (
	"context"
	"time"
)

// DeviceAttr are a device's capabilities and identity.
type DeviceAttr struct {
	// Transport names the provider, e.g. "loop", "shm", "tcp".
	Transport string
	// MaxMRSize is the largest memory region in bytes.
	MaxMRSize uint64
	// MaxQPWR, MaxSGE, MaxCQE and MaxInlineData bound QPCap and CreateCQ.
	MaxQPWR       int
	MaxSGE        int
	MaxCQE        int
	MaxInlineData int
	// MTU is the largest UD message in bytes (excluding the GRH).
	MTU int
	// MaxMsgSize is the largest RC message (SEND, WRITE or READ) in bytes.
	MaxMsgSize uint64
	// MaskedAtomicSizes is a bitmask of supported masked atomic sizes:
	// bit 3 = 8 bytes, bit 4 = 16 bytes, bit 5 = 32 bytes.
	MaskedAtomicSizes uint32
}

// Device is an open RDMA device (ibv_context).
type Device interface {
	// Address is the string a peer uses to reach this device: in
	// QPAttr.Dest and in PD.CreateAH.
	Address() string
	// ID is a small number identifying this device to its peers; it is the
	// SrcID of completions of receives it sends to.
	ID() uint32
	// Attr returns the device's capabilities.
	Attr() DeviceAttr
	// AllocPD allocates a protection domain.
	AllocPD() (PD, error)
	// CreateCQ creates a completion queue with room for depth completions.
	CreateCQ(depth int) (CQ, error)
	// Close releases the device and everything created on it; posted work
	// requests are flushed.
	Close() error
}

// PD is a protection domain: MRs, QPs, SRQs and AHs of one PD work only
// with each other.
type PD interface {
	// AllocMR allocates size bytes of zeroed memory off the Go heap and
	// registers them with the given access.
	AllocMR(size int, access Access) (MR, error)
	// CreateQP creates a queue pair in RESET.
	CreateQP(attr QPInitAttr) (QP, error)
	// CreateSRQ creates a shared receive queue holding up to maxWR receives
	// of up to maxSGE entries each.
	CreateSRQ(maxWR, maxSGE int) (SRQ, error)
	// CreateAH creates an address handle for UD sends to the device at
	// address (its Address()).
	CreateAH(address string) (AH, error)
	// CreateAHFromWC creates an address handle for a reply to the sender of
	// a received UD message.
	CreateAHFromWC(wc *WC) (AH, error)
	// Dealloc frees the PD; it fails with ErrBusy while MRs, QPs or SRQs of
	// the PD exist.
	Dealloc() error
}

// MR is a registered memory region.
type MR interface {
	// Bytes is the region's memory. It stays valid until Deregister.
	Bytes() []byte
	// Addr is the address of the first byte as the device sees it: the
	// value to use in SGE.Addr and, at peers, in SendWR.RemoteAddr.
	Addr() uint64
	// Len is the region's size in bytes.
	Len() int
	// LKey is the local key, used in SGEs.
	LKey() uint32
	// RKey is the remote key peers use; random and unguessable.
	RKey() uint32
	// Access is the region's access flags.
	Access() Access
	// Deregister invalidates the keys and frees the memory. Later accesses
	// through the keys complete with protection or access errors.
	Deregister() error
}

// CQ is a completion queue.
type CQ interface {
	// Poll moves up to len(wc) completions into wc and returns how many.
	// It never blocks and never allocates. After an overrun it returns the
	// completions still queued and ErrCQOverrun.
	Poll(wc []WC) (int, error)
	// ReqNotify arms the CQ: the next completion (only a solicited one or
	// an error, if solicitedOnly) makes Wait return. Arm, then poll once
	// more, then wait, to avoid missing a completion that raced the arm.
	ReqNotify(solicitedOnly bool) error
	// Wait blocks until an armed CQ gets a completion event or ctx ends
	// (ibv_get_cq_event).
	Wait(ctx context.Context) error
	// Depth is the number of completions the CQ can hold.
	Depth() int
	// Destroy frees the CQ; it fails with ErrBusy while QPs use it.
	Destroy() error
}

// QP is a queue pair.
type QP interface {
	// QPN is the queue-pair number peers use in QPAttr.DestQPN and
	// SendWR.RemoteQPN.
	QPN() uint32
	// Type is RC or UD.
	Type() QPType
	// State is the current state.
	State() QPState
	// Modify moves the QP to attr.State, applying the attributes the
	// transition needs.
	Modify(attr QPAttr) error
	// PostSend posts a list of send work requests with one doorbell. On
	// error it returns a *PostError naming the first rejected request.
	PostSend(wrs []SendWR) error
	// PostRecv posts a list of receives to the QP's receive queue.
	PostRecv(wrs []RecvWR) error
	// Destroy moves the QP to RESET and frees it; outstanding work
	// requests are flushed.
	Destroy() error
}

// SRQ is a shared receive queue: receives posted here are consumed by any
// QP created with it.
type SRQ interface {
	// PostRecv posts a list of receives.
	PostRecv(wrs []RecvWR) error
	// Destroy frees the SRQ; it fails with ErrBusy while QPs use it.
	Destroy() error
}

// AH is an address handle naming a UD destination device.
type AH interface {
	// Address is the destination device's address.
	Address() string
}

// ConnectRC moves an RC QP from RESET (or INIT) to RTS connected to the QP
// destQPN on the device at dest, allowing peers the given access. It is
// the three Modify calls every RC program makes.
func ConnectRC(qp QP, access Access, dest string, destQPN uint32) error {
	if qp.State() == StateReset {
		if err := qp.Modify(QPAttr{State: StateInit, Access: access}); err != nil {
			return err
		}
	}
	if err := qp.Modify(QPAttr{State: StateRTR, Dest: dest, DestQPN: destQPN}); err != nil {
		return err
	}
	return qp.Modify(QPAttr{State: StateRTS})
}

// ActivateUD moves a UD QP from RESET to RTS with the given queue key.
func ActivateUD(qp QP, qkey uint32) error {
	for _, s := range []QPState{StateInit, StateRTR, StateRTS} {
		if err := qp.Modify(QPAttr{State: s, QKey: qkey}); err != nil {
			return err
		}
	}
	return nil
}

// RetryBudget returns how long a requester waits for an unreachable
// responder before StatusRetryExcErr, for the given attributes.
func RetryBudget(timeout time.Duration, retryCount int) time.Duration {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if retryCount <= 0 {
		retryCount = DefaultRetryCount
	}
	return timeout * time.Duration(retryCount+1)
}
