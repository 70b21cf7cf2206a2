package verbs

import "fmt"

// Limits are what ValidateSend and ValidateRecv check a work request
// against: the QP's type and capabilities and the device's.
type Limits struct {
	Type              QPType
	MaxSGE            int
	MaxInlineData     int
	MTU               int
	MaxMsgSize        uint64 // zero means 2 GiB
	MaskedAtomicSizes uint32
	// Extra are the flags beyond this package's that the provider
	// implements (e.g. PRISM's); others are rejected.
	Extra SendFlags
	// Allocate says the provider implements OpAllocate.
	Allocate bool
}

// ValidateSend checks the structure of a send work request: everything
// that can be decided at post time without touching memory. Problems with
// keys, bounds and access are reported later by error completions, as in
// ibverbs. The returned error wraps ErrNotSupported, ErrInvalidArg,
// ErrTooManySGE or ErrInlineTooLarge.
func ValidateSend(wr *SendWR, l *Limits) error {
	if wr.Flags&^(flagsKnown|l.Extra) != 0 {
		return fmt.Errorf("%w: flags %v", ErrNotSupported, wr.Flags&^(flagsKnown|l.Extra))
	}
	if wr.Opcode == OpAllocate {
		if !l.Allocate || l.Type != RC {
			return fmt.Errorf("%w: opcode %v", ErrNotSupported, wr.Opcode)
		}
		if wr.Flags&(FlagIndirect|FlagBounded|FlagIndirectArg) != 0 {
			return fmt.Errorf("%w: %v with %v", ErrNotSupported, wr.Opcode, wr.Flags&(FlagIndirect|FlagBounded|FlagIndirectArg))
		}
		if wr.Length() == 0 {
			return fmt.Errorf("%w: ALLOCATE without a payload", ErrInvalidArg)
		}
	} else if wr.Opcode == 0 || wr.Opcode >= numOpcodes {
		return fmt.Errorf("%w: opcode %v", ErrNotSupported, wr.Opcode)
	}
	if wr.Flags&(FlagIndirect|FlagBounded) != 0 {
		if wr.Flags&FlagBounded != 0 && wr.Flags&FlagIndirect == 0 {
			return fmt.Errorf("%w: BOUNDED without INDIRECT", ErrInvalidArg)
		}
		switch {
		case wr.Opcode == OpRead || wr.Opcode == OpWrite:
		case wr.Opcode.IsAtomic() && wr.Flags&FlagBounded == 0:
		default:
			return fmt.Errorf("%w: %v with %v", ErrNotSupported, wr.Flags&(FlagIndirect|FlagBounded), wr.Opcode)
		}
	}
	if wr.Flags&FlagIndirectArg != 0 {
		switch {
		case wr.Opcode == OpWrite:
			if len(wr.SGL) != 0 || wr.RemoteLen == 0 {
				return fmt.Errorf("%w: an INDIRECT_ARG WRITE has no scatter list and a RemoteLen", ErrInvalidArg)
			}
		case wr.Opcode.IsAtomic():
		default:
			return fmt.Errorf("%w: INDIRECT_ARG with %v", ErrNotSupported, wr.Opcode)
		}
		if wr.ArgAddr%8 != 0 && wr.Opcode.IsAtomic() {
			return fmt.Errorf("%w: atomic operand address %#x is not 8-byte aligned", ErrInvalidArg, wr.ArgAddr)
		}
	}
	if wr.Flags&FlagRedirect != 0 && wr.Opcode != OpAllocate {
		if wr.Opcode != OpRead {
			return fmt.Errorf("%w: REDIRECT with %v", ErrNotSupported, wr.Opcode)
		}
		if len(wr.SGL) != 0 || wr.RemoteLen == 0 {
			return fmt.Errorf("%w: a REDIRECT READ has no scatter list and a RemoteLen", ErrInvalidArg)
		}
	}
	if len(wr.SGL) > l.MaxSGE {
		return fmt.Errorf("%w: %d > %d", ErrTooManySGE, len(wr.SGL), l.MaxSGE)
	}
	n := wr.Length()
	if wr.Flags&(FlagIndirectArg|FlagRedirect) != 0 && len(wr.SGL) == 0 {
		n = uint64(wr.RemoteLen)
	}
	if l.Type == UD {
		if wr.Opcode != OpSend && wr.Opcode != OpSendWithImm {
			return fmt.Errorf("%w: %v on a UD QP", ErrNotSupported, wr.Opcode)
		}
		if wr.AH == nil {
			return fmt.Errorf("%w: UD send without an address handle", ErrInvalidArg)
		}
		if n > uint64(l.MTU) {
			return fmt.Errorf("%w: UD message of %d bytes exceeds the MTU %d", ErrInvalidArg, n, l.MTU)
		}
	} else if l.Type != RC {
		return fmt.Errorf("%w: QP type %v", ErrNotSupported, l.Type)
	}
	if wr.Flags&FlagInline != 0 {
		switch wr.Opcode {
		case OpSend, OpSendWithImm, OpWrite, OpWriteWithImm, OpAllocate:
		default:
			return fmt.Errorf("%w: INLINE with %v", ErrInvalidArg, wr.Opcode)
		}
		if n > uint64(l.MaxInlineData) {
			return fmt.Errorf("%w: %d > %d bytes", ErrInlineTooLarge, n, l.MaxInlineData)
		}
	}
	maxMsg := l.MaxMsgSize
	if maxMsg == 0 || maxMsg > 1<<31 {
		maxMsg = 1 << 31
	}
	if n > maxMsg {
		return fmt.Errorf("%w: message of %d bytes exceeds the device's %d", ErrInvalidArg, n, maxMsg)
	}
	switch wr.Opcode {
	case OpAtomicCmpAndSwp, OpAtomicFetchAndAdd:
		if len(wr.SGL) != 1 || wr.SGL[0].Length != 8 {
			return fmt.Errorf("%w: %v needs one 8-byte SGE for the result", ErrInvalidArg, wr.Opcode)
		}
	case OpMaskedCmpAndSwp, OpMaskedFetchAndAdd:
		s := wr.Atomic.Size
		if s != 8 && s != 16 && s != 32 {
			return fmt.Errorf("%w: masked atomic size %d (want 8, 16 or 32)", ErrInvalidArg, s)
		}
		if l.MaskedAtomicSizes&uint32(s) == 0 {
			return fmt.Errorf("%w: masked atomic size %d", ErrNotSupported, s)
		}
		if len(wr.SGL) != 1 || wr.SGL[0].Length != uint32(s) {
			return fmt.Errorf("%w: %v of %d bytes needs one %d-byte SGE for the result", ErrInvalidArg, wr.Opcode, s, s)
		}
		if wr.Opcode == OpMaskedCmpAndSwp && !wr.Atomic.Op.Valid() {
			return fmt.Errorf("%w: compare operator %d", ErrInvalidArg, wr.Atomic.Op)
		}
	}
	return nil
}

// ValidateRecv checks the structure of a receive work request.
func ValidateRecv(wr *RecvWR, maxSGE int) error {
	if len(wr.SGL) > maxSGE {
		return fmt.Errorf("%w: %d > %d", ErrTooManySGE, len(wr.SGL), maxSGE)
	}
	if wr.Length() > 1<<31 {
		return fmt.Errorf("%w: receive of %d bytes exceeds 2 GiB", ErrInvalidArg, wr.Length())
	}
	return nil
}
