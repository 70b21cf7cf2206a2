package verbs

import "fmt"

// Opcode is the operation of a send work request.
type Opcode uint8

// Send work-request opcodes. The names follow ibverbs' IBV_WR_*.
const (
	// OpSend sends the gathered bytes; the responder consumes a posted
	// receive and gets a completion with WCRecv.
	OpSend Opcode = iota + 1
	// OpSendWithImm is OpSend with a 32-bit immediate delivered in the
	// responder's completion.
	OpSendWithImm
	// OpWrite writes the gathered bytes to RemoteAddr under RKey.
	OpWrite
	// OpWriteWithImm writes like OpWrite and then consumes a posted receive
	// at the responder, which gets a WCRecvRDMAWithImm completion carrying
	// Imm and the written length.
	OpWriteWithImm
	// OpRead reads Length bytes from RemoteAddr under RKey into the local
	// scatter list.
	OpRead
	// OpAtomicCmpAndSwp is the 8-byte compare-and-swap: if the 8 bytes at
	// RemoteAddr equal Atomic.Compare[0] they are replaced by
	// Atomic.Swap[0]; the original value is written to the local SGE (8
	// bytes).
	OpAtomicCmpAndSwp
	// OpAtomicFetchAndAdd adds Atomic.Swap[0] to the 8 bytes at RemoteAddr
	// and returns the original value in the local SGE (8 bytes).
	OpAtomicFetchAndAdd
	// OpMaskedCmpAndSwp is the extended compare-and-swap of Atomic.Size (8,
	// 16 or 32) bytes with separate compare and swap masks and a compare
	// operator; see AtomicArgs.
	OpMaskedCmpAndSwp
	// OpMaskedFetchAndAdd is the extended fetch-and-add of Atomic.Size (8,
	// 16 or 32) bytes of independent fields whose boundaries are given by
	// Atomic.SwapMask; see AtomicArgs.
	OpMaskedFetchAndAdd

	numOpcodes
)

// Opcode values from 32 to 63 are PRISM's extended operations; providers
// that do not implement one reject it with ErrNotSupported.
const (
	// OpAllocate is PRISM's ALLOCATE: the responder pops a buffer from
	// free list Queue of the region of RKey (see FreeLists), writes the
	// gathered payload into it and returns the buffer's address — in the
	// completion's Result, or with FlagRedirect as 8 native-order bytes at
	// RedirectAddr (usually the scratch area) for a later step of a chain.
	// An empty free list completes with StatusRemOpErr; a payload larger
	// than the list's buffers with StatusRemInvReqErr. The region must
	// grant remote write.
	OpAllocate Opcode = 32
)

var opcodeNames = [...]string{
	OpSend:              "SEND",
	OpSendWithImm:       "SEND_WITH_IMM",
	OpWrite:             "RDMA_WRITE",
	OpWriteWithImm:      "RDMA_WRITE_WITH_IMM",
	OpRead:              "RDMA_READ",
	OpAtomicCmpAndSwp:   "ATOMIC_CMP_AND_SWP",
	OpAtomicFetchAndAdd: "ATOMIC_FETCH_AND_ADD",
	OpMaskedCmpAndSwp:   "MASKED_ATOMIC_CMP_AND_SWP",
	OpMaskedFetchAndAdd: "MASKED_ATOMIC_FETCH_AND_ADD",
}

// String returns the ibverbs-style name, e.g. "RDMA_READ".
func (o Opcode) String() string {
	if o > 0 && o < numOpcodes {
		return opcodeNames[o]
	}
	if o == OpAllocate {
		return "PRISM_ALLOCATE"
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

// IsAtomic reports whether o is one of the atomic opcodes.
func (o Opcode) IsAtomic() bool {
	switch o {
	case OpAtomicCmpAndSwp, OpAtomicFetchAndAdd, OpMaskedCmpAndSwp, OpMaskedFetchAndAdd:
		return true
	}
	return false
}

// IsOneSided reports whether o is executed at the responder without a
// posted receive (READ, WRITE, atomics). OpWriteWithImm is one-sided for
// its data but also consumes a receive.
func (o Opcode) IsOneSided() bool {
	return o == OpWrite || o == OpWriteWithImm || o == OpRead || o.IsAtomic()
}

// HasImm reports whether o carries an immediate value.
func (o Opcode) HasImm() bool { return o == OpSendWithImm || o == OpWriteWithImm }

// WCOpcode is the operation reported by a work completion.
type WCOpcode uint8

// Work-completion opcodes (ibverbs' IBV_WC_*).
const (
	WCSend            WCOpcode = iota + 1 // a SEND or SEND_WITH_IMM completed at the requester
	WCWrite                               // an RDMA_WRITE or RDMA_WRITE_WITH_IMM completed at the requester
	WCRead                                // an RDMA_READ completed
	WCCompSwap                            // an ATOMIC_CMP_AND_SWP completed
	WCFetchAdd                            // an ATOMIC_FETCH_AND_ADD completed
	WCMaskedCompSwap                      // a MASKED_ATOMIC_CMP_AND_SWP completed
	WCMaskedFetchAdd                      // a MASKED_ATOMIC_FETCH_AND_ADD completed
	WCRecv                                // a receive consumed by a SEND or SEND_WITH_IMM
	WCRecvRDMAWithImm                     // a receive consumed by an RDMA_WRITE_WITH_IMM
	WCAllocate                            // a PRISM ALLOCATE completed; Result is the buffer
	numWCOpcodes
)

var wcOpcodeNames = [...]string{
	WCSend:            "SEND",
	WCWrite:           "RDMA_WRITE",
	WCRead:            "RDMA_READ",
	WCCompSwap:        "COMP_SWAP",
	WCFetchAdd:        "FETCH_ADD",
	WCMaskedCompSwap:  "MASKED_COMP_SWAP",
	WCMaskedFetchAdd:  "MASKED_FETCH_ADD",
	WCRecv:            "RECV",
	WCRecvRDMAWithImm: "RECV_RDMA_WITH_IMM",
	WCAllocate:        "ALLOCATE",
}

// String returns the ibverbs-style name.
func (o WCOpcode) String() string {
	if o > 0 && o < numWCOpcodes {
		return wcOpcodeNames[o]
	}
	return fmt.Sprintf("WCOpcode(%d)", uint8(o))
}

// WCOpcodeOf returns the completion opcode a requester sees for a send
// work request with opcode o.
func WCOpcodeOf(o Opcode) WCOpcode {
	switch o {
	case OpSend, OpSendWithImm:
		return WCSend
	case OpWrite, OpWriteWithImm:
		return WCWrite
	case OpRead:
		return WCRead
	case OpAtomicCmpAndSwp:
		return WCCompSwap
	case OpAtomicFetchAndAdd:
		return WCFetchAdd
	case OpMaskedCmpAndSwp:
		return WCMaskedCompSwap
	case OpAllocate:
		return WCAllocate
	case OpMaskedFetchAndAdd:
		return WCMaskedFetchAdd
	}
	return 0
}

// SendFlags modify a send work request.
type SendFlags uint32

// Send flags (ibverbs' IBV_SEND_*). Bits 8–15 are reserved for PRISM's
// flags (INDIRECT, INDIRECT_ARG, BOUNDED, CONDITIONAL, REDIRECT); providers
// that do not implement them reject them with ErrNotSupported.
const (
	// FlagSignaled asks for a completion on success. Errors always
	// complete, signaled or not.
	FlagSignaled SendFlags = 1 << iota
	// FlagInline copies the payload into the work request at post time:
	// the buffer may be reused as soon as PostSend returns. The lkey is
	// not needed (the payload is found by address), but the bytes must lie
	// in a memory region of the QP's PD. Limited to the QP's MaxInlineData
	// bytes; SEND and WRITE only.
	FlagInline
	// FlagFence waits until every prior READ and atomic of this QP has
	// completed before the work request starts.
	FlagFence
	// FlagSolicited sets the solicited-event bit: a responder CQ armed with
	// ReqNotify(true) is woken by this SEND or WRITE_WITH_IMM.
	FlagSolicited

	// flagsKnown is the set of flags defined by this package.
	flagsKnown = FlagSignaled | FlagInline | FlagFence | FlagSolicited
	// FlagsPRISM is the bit range reserved for PRISM's flags.
	FlagsPRISM SendFlags = 0xff00
)

// PRISM flags (docs/prism.md). A provider that implements one lists it in
// its QPs' Limits.Extra; elsewhere it is rejected with ErrNotSupported.
const (
	// FlagIndirect makes a READ, WRITE or atomic treat RemoteAddr as the
	// address of an 8-byte pointer slot (an address in the responder's address
	// space, in its native byte order like an atomic's operand, 8-byte
	// aligned) and act on the memory it points to.
	// The slot and the pointee must both lie in the region of the
	// request's rkey; otherwise the request completes with
	// StatusRemAccessErr (StatusRemInvReqErr for a misaligned slot). The
	// slot is read atomically: a pointer installed by a CAS is seen whole
	// (a bounded pair is read under the responder's atomics lock).
	FlagIndirect SendFlags = 1 << 8
	// FlagBounded, with FlagIndirect, makes the slot a 16-byte,
	// 16-byte-aligned bounded pointer ⟨pointer, bound⟩ (two native-order
	// words, the pointer first): the operation covers min(requested length, bound) bytes. A
	// bounded READ's completion reports that length in ByteLen and leaves
	// the rest of the local buffer untouched; a bounded WRITE writes the
	// first min(length, bound) bytes of its payload.
	FlagBounded SendFlags = 1 << 10
	// FlagConditional runs the work request only after the one before it
	// on the same QP has completed, and only if that one succeeded: a
	// failed request, a skipped one, or a compare-and-swap (plain or
	// masked) whose comparison did not hold counts as failure. Otherwise
	// the request completes with StatusSkipped without running, and counts
	// as a failure for the next one. The responder evaluates the condition
	// in order, so a chain posted in one list needs no round trip between
	// its steps. The first request of a connection runs.
	FlagConditional SendFlags = 1 << 11
	// FlagIndirectArg takes an operand from the responder's memory at
	// SendWR.ArgAddr instead of from the request: a WRITE's RemoteLen
	// bytes of data (its scatter list must be empty), or the swap operand
	// (the add operand of a fetch-and-add) of an atomic, Size bytes (8 for
	// the plain atomics), 8-byte aligned. The compare operand always comes
	// from the request. The operand is read when the request runs, not
	// atomically with it.
	FlagIndirectArg SendFlags = 1 << 9
	// FlagRedirect writes a READ's data to the responder's memory at
	// SendWR.RedirectAddr instead of returning it: the READ moves
	// RemoteLen bytes within the responder and its scatter list must be
	// empty. The completion's ByteLen is RemoteLen.
	FlagRedirect SendFlags = 1 << 12
)

// The scratch area. Every RC QP has ScratchSize bytes of memory at its
// responder side that its peer addresses as ScratchBase+offset (see
// ScratchAddr) in RedirectAddr, ArgAddr, and the RemoteAddr of plain READs
// and WRITEs, without an rkey: PRISM's per-connection area where a chain
// leaves a result (a redirected READ) for a later step (an INDIRECT_ARG
// operand). It starts zeroed with each connection and is private to it.
const (
	// ScratchBase is the address of byte 0 of the peer QP's scratch area;
	// no region address is this high.
	ScratchBase uint64 = 1 << 63
	// ScratchSize is the size of the scratch area.
	ScratchSize = 64
)

// ScratchAddr is the address of byte off of the peer QP's scratch area.
func ScratchAddr(off int) uint64 { return ScratchBase + uint64(off) }

// String lists the set flags, e.g. "SIGNALED|INLINE".
func (f SendFlags) String() string {
	if f == 0 {
		return "0"
	}
	s := ""
	add := func(b SendFlags, name string) {
		if f&b != 0 {
			if s != "" {
				s += "|"
			}
			s += name
			f &^= b
		}
	}
	add(FlagSignaled, "SIGNALED")
	add(FlagInline, "INLINE")
	add(FlagFence, "FENCE")
	add(FlagSolicited, "SOLICITED")
	add(FlagIndirect, "INDIRECT")
	add(FlagBounded, "BOUNDED")
	add(FlagConditional, "CONDITIONAL")
	add(FlagIndirectArg, "INDIRECT_ARG")
	add(FlagRedirect, "REDIRECT")
	if f != 0 {
		if s != "" {
			s += "|"
		}
		s += fmt.Sprintf("%#x", uint32(f))
	}
	return s
}
