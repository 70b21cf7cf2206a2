package verbs

// SGE is a scatter/gather element: Length bytes at Addr inside the local
// memory region whose lkey is LKey. Addr is in the MR's address space
// (MR.Addr() is the address of its first byte).
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// CompareOp is the comparison of a masked compare-and-swap.
type CompareOp uint8

// Compare operators of OpMaskedCmpAndSwp. The comparison is between the
// masked remote value and the masked Compare operand, remote on the left:
// CmpLess swaps when remote&mask < compare&mask. Values are unsigned; see
// AtomicArgs for the byte order.
const (
	CmpEqual        CompareOp = iota // remote == compare
	CmpNotEqual                      // remote != compare
	CmpLess                          // remote <  compare
	CmpLessEqual                     // remote <= compare
	CmpGreater                       // remote >  compare
	CmpGreaterEqual                  // remote >= compare
	numCompareOps
)

var compareOpNames = [...]string{"EQ", "NE", "LT", "LE", "GT", "GE"}

// String returns "EQ", "NE", "LT", "LE", "GT" or "GE".
func (c CompareOp) String() string {
	if c < numCompareOps {
		return compareOpNames[c]
	}
	return "CompareOp(?)"
}

// Valid reports whether c is one of the defined operators.
func (c CompareOp) Valid() bool { return c < numCompareOps }

// AtomicArgs are the operands of an atomic work request.
//
// For the 8-byte OpAtomicCmpAndSwp and OpAtomicFetchAndAdd only
// Compare[0] (the compare value) and Swap[0] (the swap value, or the
// addend) are used.
//
// For the masked opcodes the operand is Size bytes (8, 16 or 32) at a
// RemoteAddr aligned to Size. It is viewed as Size/8 words: word i is the
// native (little-endian) uint64 stored at RemoteAddr+8i. For the ordered
// comparisons word 0 is the most significant: a 32-byte value compares
// like the big-endian concatenation word0‖word1‖word2‖word3. Put the field
// that decides an ordering (a tag, a timestamp) in word 0.
//
// OpMaskedCmpAndSwp: with remote value R, the swap happens when
// (R & CompareMask) Op (Compare & CompareMask); it then stores
// (R &^ SwapMask) | (Swap & SwapMask). The original R is returned.
//
// OpMaskedFetchAndAdd: Swap holds the addends and SwapMask marks field
// boundaries: a set bit i in SwapMask ends a field at bit i, so the carry
// out of bit i is dropped instead of propagating into bit i+1. A zero
// SwapMask makes each 64-bit word one field; carries never cross words.
// The original value is returned.
type AtomicArgs struct {
	Compare     [4]uint64
	CompareMask [4]uint64
	Swap        [4]uint64
	SwapMask    [4]uint64
	Op          CompareOp
	Size        uint8 // 8, 16 or 32 for the masked opcodes; ignored otherwise
}

// SendWR is a send work request: SEND, WRITE, READ or an atomic. A post
// list is a slice of SendWR posted by one QP.PostSend call (one doorbell).
type SendWR struct {
	// ID is the caller's wr_id, returned in the completion.
	ID uint64
	// Opcode is the operation.
	Opcode Opcode
	// Flags are SIGNALED, INLINE, FENCE, SOLICITED.
	Flags SendFlags
	// SGL is the local scatter/gather list: the payload for SEND and
	// WRITE, the destination for READ and for the original value of an
	// atomic. The list is copied at post time; the memory it names must
	// stay valid until the completion (unless INLINE).
	SGL []SGE
	// Imm is the immediate value of SEND_WITH_IMM and WRITE_WITH_IMM.
	Imm uint32
	// RemoteAddr and RKey name the remote memory of WRITE, READ and
	// atomics.
	RemoteAddr uint64
	RKey       uint32
	// Atomic holds the operands of atomic opcodes.
	Atomic AtomicArgs
	// ArgAddr is where a FlagIndirectArg request takes its operand, and
	// RedirectAddr where a FlagRedirect READ puts its data: addresses in
	// the region of RKey, or in the peer's scratch area (ScratchAddr).
	ArgAddr, RedirectAddr uint64
	// RemoteLen is the length of a transfer that has no local buffer: a
	// FlagRedirect READ or a FlagIndirectArg WRITE.
	RemoteLen uint32
	// Queue is the free list an OpAllocate pops from.
	Queue uint32
	// AH, RemoteQPN and RemoteQKey address a UD SEND.
	AH         AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// Length returns the total number of bytes named by the scatter/gather
// list.
func (wr *SendWR) Length() uint64 {
	var n uint64
	for i := range wr.SGL {
		n += uint64(wr.SGL[i].Length)
	}
	return n
}

// RecvWR is a receive work request: a scatter list that an incoming SEND
// or WRITE_WITH_IMM fills.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// Length returns the total number of bytes the receive can hold.
func (wr *RecvWR) Length() uint64 {
	var n uint64
	for i := range wr.SGL {
		n += uint64(wr.SGL[i].Length)
	}
	return n
}
