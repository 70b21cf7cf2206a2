package txnexp

import (
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
)

// TestDoublingCheck: maybe checks only once the history has doubled
// since the last check, final always does, and a cycle added after the
// last check is found by final (the end of a transport's points) even
// when maybe skipped it.
func TestDoublingCheck(t *testing.T) {
	h := check.NewHistory()
	d := &doublingCheck{h: h}
	add := func(key string, rv, wv uint64) {
		h.Add([]txn.Access{{Key: key, Version: rv}}, []txn.Access{{Key: key, Version: wv}})
	}
	for i := range 8 {
		add("a", uint64(i), uint64(i+1))
	}
	if n, err := d.maybe(); err != nil || n != 8 {
		t.Fatalf("first maybe: %d, %v; want a check of 8", n, err)
	}
	add("a", 8, 9)
	if n, err := d.maybe(); err != nil || n != 8 {
		t.Fatalf("maybe at 9 of 8 checked: %d, %v; want no check (8)", n, err)
	}
	// Two transactions that each read the other's write: a cycle.
	h.Add([]txn.Access{{Key: "x", Version: 0}, {Key: "y", Version: 1}}, []txn.Access{{Key: "x", Version: 1}})
	h.Add([]txn.Access{{Key: "y", Version: 0}, {Key: "x", Version: 1}}, []txn.Access{{Key: "y", Version: 1}})
	if n, err := d.maybe(); err != nil || n != 8 {
		t.Fatalf("maybe at 11 of 8 checked: %d, %v; want no check yet", n, err)
	}
	if _, err := d.final(); !errors.Is(err, check.ErrNotSerializable) {
		t.Fatalf("final over a cycle: %v, want ErrNotSerializable", err)
	}
}
