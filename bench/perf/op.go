package perf

import (
	"fmt"
	"strings"

	"github.com/rdmakit/rdmakit/verbs"
)

// Op is a measured operation.
type Op uint8

// Operations.
const (
	Read  Op = iota + 1 // RDMA READ
	Write               // RDMA WRITE
	Send                // two-sided SEND / RECV
	CAS                 // 8-byte atomic compare-and-swap
	FAA                 // 8-byte atomic fetch-and-add
)

// Ops is every operation, in the order reports list them.
var Ops = []Op{Read, Write, Send, CAS, FAA}

// String returns the short lower-case name: "read", "write", "send",
// "cas" or "faa".
func (o Op) String() string {
	switch o {
	case Read:
		return "read"
	case Write:
		return "write"
	case Send:
		return "send"
	case CAS:
		return "cas"
	case FAA:
		return "faa"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Opcode is the verbs opcode the operation posts.
func (o Op) Opcode() verbs.Opcode {
	switch o {
	case Read:
		return verbs.OpRead
	case Write:
		return verbs.OpWrite
	case Send:
		return verbs.OpSend
	case CAS:
		return verbs.OpAtomicCmpAndSwp
	case FAA:
		return verbs.OpAtomicFetchAndAdd
	}
	return 0
}

// Atomic reports whether the operation is an 8-byte atomic.
func (o Op) Atomic() bool { return o == CAS || o == FAA }

// Title is the perftest-style name used in report headers, e.g.
// "RDMA_Read".
func (o Op) Title() string {
	switch o {
	case Read:
		return "RDMA_Read"
	case Write:
		return "RDMA_Write"
	case Send:
		return "Send"
	case CAS:
		return "Atomic CMP_AND_SWAP"
	case FAA:
		return "Atomic FETCH_AND_ADD"
	}
	return o.String()
}

// ParseOps parses "read", "write", "send", "cas", "faa", a comma-separated
// list of them, or "all".
func ParseOps(s string) ([]Op, error) {
	if s == "all" || s == "" {
		return Ops, nil
	}
	var ops []Op
	for name := range strings.SplitSeq(s, ",") {
		found := false
		for _, o := range Ops {
			if o.String() == strings.TrimSpace(strings.ToLower(name)) {
				ops, found = append(ops, o), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown operation %q (want read, write, send, cas, faa or all)", name)
		}
	}
	return ops, nil
}

// Test is a kind of measurement.
type Test uint8

// Tests.
const (
	// Lat posts one operation at a time and times each until its
	// completion is polled (ib_*_lat).
	Lat Test = iota + 1
	// BW keeps a window of operations outstanding and reports the
	// completion rate (ib_*_bw).
	BW
)

// String returns "lat" or "bw".
func (t Test) String() string {
	switch t {
	case Lat:
		return "lat"
	case BW:
		return "bw"
	}
	return fmt.Sprintf("Test(%d)", uint8(t))
}

// ParseTests parses "lat", "bw" or "both".
func ParseTests(s string) ([]Test, error) {
	switch s {
	case "lat":
		return []Test{Lat}, nil
	case "bw":
		return []Test{BW}, nil
	case "both", "":
		return []Test{Lat, BW}, nil
	}
	return nil, fmt.Errorf("unknown test %q (want lat, bw or both)", s)
}
