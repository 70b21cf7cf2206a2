package shm

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzControl feeds arbitrary bytes (and descriptor counts) to the control
// message decoder: nothing panics, every failure is ErrProtocol, and what
// decodes re-encodes to the same bytes.
func FuzzControl(f *testing.F) {
	for _, m := range []ctlMsg{
		{kind: ctlHello, u32: 1 << 22, address: "shm://a"},
		{kind: ctlWelcome, u32: 3, address: "shm://b"},
		{kind: ctlReject, address: "no"},
		{kind: ctlRegion, u32: 7, live: 3},
		{kind: ctlRevoke, u32: 7, live: 3},
	} {
		f.Add(m.encode(), uint8(len(m.fds)))
	}
	f.Fuzz(func(t *testing.T, b []byte, nfds uint8) {
		fds := make([]int, nfds%4)
		for i := range fds {
			fds[i] = -1 // never a real descriptor: closeFDs skips them
		}
		m, err := decodeCtl(b, fds)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if out := m.encode(); !bytes.Equal(out[:6], b[:6]) || !bytes.Equal(out[ctlHeader:], b[ctlHeader:]) || out[6] != b[6] {
			t.Fatalf("does not re-encode:\n in  %x\n out %x", b, out)
		}
	})
}
