package check_test

import (
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/check"
)

// Example checks two small key-value histories with porcupine. Times
// are the operations' call and return instants (in a real test, from
// KVHistory.Now around each call).
func Example() {
	// A GET that overlaps a PUT may see its value: linearizable.
	h := check.NewKVHistory()
	h.Add(0, check.KVInput{Kind: check.KVPut, Key: "x", Value: "1"}, check.KVOutput{}, 0, 10, false)
	h.Add(1, check.KVInput{Kind: check.KVGet, Key: "x"}, check.KVOutput{Value: "1", Found: true}, 5, 15, false)
	res, _ := h.Check(time.Second)
	fmt.Println(res)

	// A GET that starts after the PUT returned must see it: missing it is
	// the stale read the stores' tests look for.
	h = check.NewKVHistory()
	h.Add(0, check.KVInput{Kind: check.KVPut, Key: "x", Value: "1"}, check.KVOutput{}, 0, 10, false)
	h.Add(1, check.KVInput{Kind: check.KVGet, Key: "x"}, check.KVOutput{Found: false}, 20, 30, false)
	res, _ = h.Check(time.Second)
	fmt.Println(res)

	// A PUT whose outcome is unknown (it timed out) may or may not have
	// happened: either answer of a later GET is fine.
	h = check.NewKVHistory()
	h.Add(0, check.KVInput{Kind: check.KVPut, Key: "x", Value: "1"}, check.KVOutput{}, 0, 0, true)
	h.Add(1, check.KVInput{Kind: check.KVGet, Key: "x"}, check.KVOutput{Found: false}, 20, 30, false)
	res, _ = h.Check(time.Second)
	fmt.Println(res)
	// Output:
	// Ok
	// Illegal
	// Ok
}
