package verbs

import (
	"errors"
	"testing"
)

func TestStatusNames(t *testing.T) {
	for s := StatusSuccess; s < numStatus; s++ {
		if statusNames[s] == "" {
			t.Errorf("status %d has no name", s)
		}
	}
	if StatusRemAccessErr.String() != "REM_ACCESS_ERR" {
		t.Error(StatusRemAccessErr.String())
	}
	if StatusSuccess.Err() != nil {
		t.Error("success is an error")
	}
	if err := StatusRNRRetryExcErr.Err(); !errors.Is(err, StatusRNRRetryExcErr.Err()) || errors.Is(err, StatusRetryExcErr.Err()) {
		t.Error("StatusError.Is does not compare statuses")
	}
}

func TestTransitions(t *testing.T) {
	ok := [][2]QPState{{StateReset, StateInit}, {StateInit, StateRTR}, {StateRTR, StateRTS}, {StateRTS, StateRTS},
		{StateInit, StateInit}, {StateRTS, StateError}, {StateError, StateReset}, {StateRTR, StateReset}}
	bad := [][2]QPState{{StateReset, StateRTR}, {StateReset, StateRTS}, {StateInit, StateRTS}, {StateRTS, StateRTR},
		{StateError, StateRTS}, {StateError, StateInit}, {StateRTR, StateInit}}
	for _, p := range ok {
		if !ValidTransition(p[0], p[1]) {
			t.Errorf("%v → %v refused", p[0], p[1])
		}
	}
	for _, p := range bad {
		if ValidTransition(p[0], p[1]) {
			t.Errorf("%v → %v allowed", p[0], p[1])
		}
	}
}

func TestAccessValidate(t *testing.T) {
	if err := (AccessRemoteWrite).Validate(); !errors.Is(err, ErrAccess) {
		t.Error("remote write without local write accepted")
	}
	if err := (AccessRemoteAtomic | AccessRemoteRead).Validate(); !errors.Is(err, ErrAccess) {
		t.Error("remote atomic without local write accepted")
	}
	if err := (AccessRemoteRead).Validate(); err != nil {
		t.Error(err)
	}
	if err := AccessAll.Validate(); err != nil {
		t.Error(err)
	}
	if err := Access(1 << 20).Validate(); !errors.Is(err, ErrAccess) {
		t.Error("unknown bit accepted")
	}
}

func TestValidateSend(t *testing.T) {
	rc := &Limits{Type: RC, MaxSGE: 2, MaxInlineData: 16, MTU: 4096, MaskedAtomicSizes: 8 | 16 | 32}
	ud := &Limits{Type: UD, MaxSGE: 2, MaxInlineData: 16, MTU: 64, MaskedAtomicSizes: 8}
	sge8 := []SGE{{Length: 8}}
	cases := []struct {
		name string
		wr   SendWR
		l    *Limits
		want error
	}{
		{"ok read", SendWR{Opcode: OpRead, SGL: sge8}, rc, nil},
		{"no opcode", SendWR{}, rc, ErrNotSupported},
		{"unknown opcode", SendWR{Opcode: 200}, rc, ErrNotSupported},
		{"unknown flag", SendWR{Opcode: OpSend, Flags: 1 << 20}, rc, ErrNotSupported},
		{"prism flag unsupported", SendWR{Opcode: OpRead, Flags: 1 << 8}, rc, ErrNotSupported},
		{"too many sge", SendWR{Opcode: OpSend, SGL: make([]SGE, 3)}, rc, ErrTooManySGE},
		{"inline too large", SendWR{Opcode: OpSend, Flags: FlagInline, SGL: []SGE{{Length: 17}}}, rc, ErrInlineTooLarge},
		{"inline read", SendWR{Opcode: OpRead, Flags: FlagInline, SGL: sge8}, rc, ErrInvalidArg},
		{"cas sge size", SendWR{Opcode: OpAtomicCmpAndSwp, SGL: []SGE{{Length: 4}}}, rc, ErrInvalidArg},
		{"masked size", SendWR{Opcode: OpMaskedCmpAndSwp, SGL: sge8, Atomic: AtomicArgs{Size: 12}}, rc, ErrInvalidArg},
		{"masked op", SendWR{Opcode: OpMaskedCmpAndSwp, SGL: sge8, Atomic: AtomicArgs{Size: 8, Op: 9}}, rc, ErrInvalidArg},
		{"masked ok", SendWR{Opcode: OpMaskedCmpAndSwp, SGL: []SGE{{Length: 32}}, Atomic: AtomicArgs{Size: 32}}, rc, nil},
		{"ud read", SendWR{Opcode: OpRead, SGL: sge8}, ud, ErrNotSupported},
		{"ud no ah", SendWR{Opcode: OpSend, SGL: sge8}, ud, ErrInvalidArg},
	}
	for _, c := range cases {
		err := ValidateSend(&c.wr, c.l)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestParsePollPolicy(t *testing.T) {
	for _, s := range []string{"adaptive", "busy", "event"} {
		if _, err := ParsePollPolicy(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParsePollPolicy("nope"); !errors.Is(err, ErrInvalidArg) {
		t.Error("bad policy accepted")
	}
}
