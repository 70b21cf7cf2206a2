package wire

import (
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestReservedFieldsRejected: every send-flag bit the protocol does not
// define, a reserved byte of an atomic's operand header and the reserved
// bytes of a response are refused with ErrReserved (and ErrMalformed);
// every defined flag still decodes.
func TestReservedFieldsRejected(t *testing.T) {
	var pbuf [1][]byte
	for bit := 0; bit < 16; bit++ {
		f := verbs.SendFlags(1) << bit
		r := nic.Request{SrcQPN: 1, DstQPN: 2, Opcode: verbs.OpRead, Length: 8, Flags: f}
		if f&(verbs.FlagIndirectArg|verbs.FlagRedirect) != 0 {
			r.Opcode = verbs.OpAtomicFetchAndAdd // operands that fit INDIRECT_ARG and REDIRECT alike
		}
		var got nic.Request
		err := DecodeRequest(AppendRequest(nil, &r), &got, &pbuf, 1<<20)
		defined := f&wireFlags != 0
		switch {
		case defined && err != nil:
			t.Errorf("flag %#x: %v", uint16(f), err)
		case !defined && (!errors.Is(err, ErrReserved) || !errors.Is(err, ErrMalformed)):
			t.Errorf("reserved flag %#x: %v, want ErrReserved", uint16(f), err)
		}
	}
	at := AppendRequest(nil, &nic.Request{Opcode: verbs.OpAtomicCmpAndSwp, Length: 8})
	at[RequestHeader+5] = 1
	if err := DecodeRequest(at, new(nic.Request), &pbuf, 1<<20); !errors.Is(err, ErrReserved) {
		t.Errorf("atomic with a reserved byte set: %v, want ErrReserved", err)
	}
	resp := AppendResponse(nil, &nic.Response{SrcQPN: 1})
	resp[3] = 0x80
	if err := DecodeResponse(resp, new(nic.Response)); !errors.Is(err, ErrReserved) {
		t.Errorf("response with a reserved byte set: %v, want ErrReserved", err)
	}
}
