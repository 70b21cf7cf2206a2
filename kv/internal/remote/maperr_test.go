package remote

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/rpc"
)

// TestMapErrNilAllocatesNothing: the store clients map every operation's
// error, nil included, on the hot path.
func TestMapErrNilAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = MapErr(nil, false) }); n != 0 {
		t.Fatalf("MapErr(nil) allocates %v times", n)
	}
}

// TestMapErrSaysFullOnce: a node's "kv: node full" comes back as
// kv.ErrFull with the node's detail, the words "node full" once.
func TestMapErrSaysFullOnce(t *testing.T) {
	for _, msg := range []string{"kv: node full", "kv: node full: 1024 bytes of memory used"} {
		err := MapErr(&rpc.RemoteError{Msg: msg}, false)
		if !errors.Is(err, kv.ErrFull) || strings.Count(err.Error(), "node full") != 1 {
			t.Errorf("%q: %v", msg, err)
		}
	}
	err := MapErr(&rpc.RemoteError{Msg: "kv: key or value too large: a 300-byte key"}, false)
	if !errors.Is(err, kv.ErrTooLarge) || strings.Count(err.Error(), "too large") != 1 {
		t.Errorf("too large: %v", err)
	}
}
