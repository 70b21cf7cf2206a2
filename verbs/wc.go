package verbs

// WCFlags describe a work completion.
type WCFlags uint8

// Work-completion flags.
const (
	// WCWithImm: Imm holds an immediate value.
	WCWithImm WCFlags = 1 << iota
	// WCGRH: the first GRHSize bytes of the receive buffer hold a global
	// routing header (UD receives).
	WCGRH
	// WCSolicited: the sender set FlagSolicited.
	WCSolicited
)

// GRHSize is the number of bytes a UD receive buffer reserves at its start
// for the global routing header, as in ibverbs.
const GRHSize = 40

// WC is a work completion.
type WC struct {
	// ID is the wr_id of the completed work request.
	ID uint64
	// Status is the outcome; anything but StatusSuccess is an error.
	Status Status
	// Opcode is the completed operation. It is only meaningful when Status
	// is StatusSuccess, as in ibverbs.
	Opcode WCOpcode
	// Flags says whether Imm and a GRH are present.
	Flags WCFlags
	// ByteLen is the number of bytes transferred: received bytes for a
	// receive (including the GRH on UD), the written length for
	// RECV_RDMA_WITH_IMM, the read length for a READ.
	ByteLen uint32
	// Imm is the immediate value when Flags has WCWithImm.
	Imm uint32
	// QPN is the number of the local QP the work request was posted to.
	QPN uint32
	// SrcQPN is the sender's QP number, for receives.
	SrcQPN uint32
	// SrcID identifies the sending device for receives (the ibverbs slid);
	// PD.CreateAHFromWC turns it into an address handle for a reply.
	SrcID uint32
	// Result is the address of the buffer a PRISM ALLOCATE filled (zero
	// when it was redirected).
	Result uint64
}

// Err returns the completion's status as an error, nil on success.
func (wc *WC) Err() error { return wc.Status.Err() }
