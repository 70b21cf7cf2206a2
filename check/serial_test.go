package check

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/txn"
)

// acc is an access of key k at version v.
func acc(k string, v uint64) txn.Access { return txn.Access{Key: k, Version: v} }

// cycleOf asserts err is a cycle through exactly the transactions want
// (in some rotation) of Adya class class.
func cycleOf(t *testing.T, err error, class string, want ...int) *CycleError {
	t.Helper()
	var ce *CycleError
	if !errors.As(err, &ce) || !errors.Is(err, ErrNotSerializable) {
		t.Fatalf("err %v, want a *CycleError", err)
	}
	got := ce.Txns()
	slices.Sort(got)
	if !slices.Equal(got, want) || ce.Class() != class {
		t.Fatalf("cycle %v (%s), want transactions %v (%s)", ce, ce.Class(), want, class)
	}
	for i, d := range ce.Cycle {
		if d.To != ce.Cycle[(i+1)%len(ce.Cycle)].From || d.Key == "" {
			t.Fatalf("cycle %v: edge %d does not chain or names no key", ce, i)
		}
	}
	return ce
}

// TestWriteSkew: T1 reads x and y, writes x; T2 reads x and y, writes y;
// both read the versions before the other's write: rw edges both ways.
func TestWriteSkew(t *testing.T) {
	h := []Txn{
		{Reads: []txn.Access{acc("x", 1), acc("y", 1)}, Writes: []txn.Access{acc("x", 1), acc("y", 1)}}, // the loader
		{Reads: []txn.Access{acc("x", 1), acc("y", 1)}, Writes: []txn.Access{acc("x", 2)}},
		{Reads: []txn.Access{acc("x", 1), acc("y", 1)}, Writes: []txn.Access{acc("y", 2)}},
	}
	h[0].Reads = nil
	ce := cycleOf(t, Serializable(h), "G2", 1, 2)
	for _, d := range ce.Cycle {
		if d.Kind != RW {
			t.Fatalf("write skew cycle %v has a %v edge", ce, d.Kind)
		}
	}
}

// TestLostUpdate: two read-modify-writes of x read version 1; one
// installs 2, the other 3.
func TestLostUpdate(t *testing.T) {
	h := []Txn{
		{Writes: []txn.Access{acc("x", 1)}},
		{Reads: []txn.Access{acc("x", 1)}, Writes: []txn.Access{acc("x", 2)}},
		{Reads: []txn.Access{acc("x", 1)}, Writes: []txn.Access{acc("x", 3)}},
	}
	ce := cycleOf(t, Serializable(h), "G2", 1, 2)
	if len(ce.Cycle) != 2 || ce.Cycle[0].Key != "x" {
		t.Fatalf("lost update reported as %v", ce)
	}
}

// TestDirtyRead: a read of a version only an aborted transaction wrote
// (it is not in the history of committed ones).
func TestDirtyRead(t *testing.T) {
	h := []Txn{
		{Writes: []txn.Access{acc("x", 1)}},
		{Reads: []txn.Access{acc("x", 2)}}, // version 2 came from an aborted transaction
	}
	err := Serializable(h)
	var re *ReadError
	if !errors.As(err, &re) || !errors.Is(err, ErrNotSerializable) || re.Txn != 1 || re.Key != "x" || re.Version != 2 || re.Writer != -1 {
		t.Fatalf("err %v, want a *ReadError of T1 on x version 2", err)
	}
	// Reading a deleted version as present is as wrong.
	h = []Txn{{Writes: []txn.Access{{Key: "x", Version: 1, Deleted: true}}}, {Reads: []txn.Access{acc("x", 1)}}}
	if err := Serializable(h); !errors.As(err, &re) || re.Writer != 0 {
		t.Fatalf("err %v, want a *ReadError naming writer T0", err)
	}
}

// TestDuplicateVersion: two committed transactions installing one
// version, and a write of version 0.
func TestDuplicateVersion(t *testing.T) {
	h := []Txn{{Writes: []txn.Access{acc("x", 1)}}, {Writes: []txn.Access{acc("x", 1)}}, {Writes: []txn.Access{acc("y", 0)}}}
	err := Serializable(h)
	var we *WriteError
	if !errors.As(err, &we) || we.Key != "x" || we.Version != 1 || we.Txns != [2]int{0, 1} {
		t.Fatalf("err %v, want a *WriteError of T0 and T1 on x", err)
	}
	if !errors.Is(err, ErrNotSerializable) || !strings.Contains(err.Error(), `version 0 of "y"`) {
		t.Fatalf("err %v does not report the write of version 0", err)
	}
}

// TestCircularFlow: T1 writes x, T2 reads it and writes y, T1 read y
// after T2's write: a G1c cycle (ww and wr only).
func TestCircularFlow(t *testing.T) {
	h := []Txn{
		{Reads: []txn.Access{acc("y", 1)}, Writes: []txn.Access{acc("x", 1)}},
		{Reads: []txn.Access{acc("x", 1)}, Writes: []txn.Access{acc("y", 1)}},
	}
	cycleOf(t, Serializable(h), "G1c", 0, 1)
	// Two writers ordered differently on two keys: G0.
	h = []Txn{
		{Writes: []txn.Access{acc("x", 1), acc("y", 2)}},
		{Writes: []txn.Access{acc("x", 2), acc("y", 1)}},
	}
	cycleOf(t, Serializable(h), "G0", 0, 1)
}

// TestSerialHistory: a serial execution with reads of absent records,
// deletes, re-inserts and reads of own keys passes.
func TestSerialHistory(t *testing.T) {
	h := []Txn{
		{Reads: []txn.Access{{Key: "x", Deleted: true}}, Writes: []txn.Access{acc("x", 1)}},
		{Reads: []txn.Access{acc("x", 1)}, Writes: []txn.Access{{Key: "x", Version: 2, Deleted: true}, acc("y", 1)}},
		{Reads: []txn.Access{{Key: "x", Version: 2, Deleted: true}, acc("y", 1)}, Writes: []txn.Access{acc("x", 3)}},
		{Reads: []txn.Access{acc("x", 3), acc("z", 0)}},
		{Reads: []txn.Access{acc("x", 1)}}, // a read-only transaction serialized early: rw to T1
	}
	if err := Serializable(h); err != nil {
		t.Fatal(err)
	}
	if err := Serializable(nil); err != nil {
		t.Fatal(err)
	}
}

// TestLongCycle: a cycle through many transactions is found with the
// explicit stack and reported whole.
func TestLongCycle(t *testing.T) {
	n := 200_000
	if raceEnabled {
		n = 20_000
	}
	h := make([]Txn, n)
	for i := range h {
		k := "k" + strconv.Itoa(i)
		next := "k" + strconv.Itoa((i+1)%n)
		h[i] = Txn{Writes: []txn.Access{acc(k, 1)}, Reads: []txn.Access{acc(next, 0)}}
	}
	// Each T_i read k_{i+1} before T_{i+1} wrote it: rw T_i → T_{i+1}, around.
	var ce *CycleError
	if err := Serializable(h); !errors.As(err, &ce) || len(ce.Cycle) != n {
		t.Fatalf("err %.200v, want a cycle of %d", err, n)
	}
}

// TestHistory: concurrent Adds copy what they are handed.
func TestHistory(t *testing.T) {
	h := NewHistory()
	done := make(chan bool)
	for g := range 4 {
		go func() {
			reads := make([]txn.Access, 1)
			writes := make([]txn.Access, 1)
			for i := range 1000 {
				k := "g" + strconv.Itoa(g)
				reads[0], writes[0] = acc(k, uint64(i)), acc(k, uint64(i+1))
				h.Add(reads, writes)
				reads[0].Version, writes[0].Version = 99999, 99999 // reused by the caller
			}
			done <- true
		}()
	}
	for range 4 {
		<-done
	}
	if h.Len() != 4000 {
		t.Fatalf("%d transactions, want 4000", h.Len())
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	h.Add([]txn.Access{acc("g0", 5)}, []txn.Access{acc("g0", 3000)})
	var ce *CycleError
	if err := h.Check(); !errors.As(err, &ce) || !slices.Contains(ce.Txns(), 4000) {
		t.Fatalf("T4000 installed a version after reading an old one: err %v", err)
	}
}

// TestMillionSerial: a random serial history of a million transactions
// (two reads, two writes each, over 100,000 keys) is checked in seconds;
// swapping two versions read makes it fail.
func TestMillionSerial(t *testing.T) {
	if testing.Short() {
		t.Skip("a million transactions")
	}
	n, keys := 1_000_000, 100_000
	if raceEnabled {
		n, keys = 100_000, 10_000
	}
	r := rand.New(rand.NewPCG(1, 2))
	names := make([]string, keys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	version := make([]uint64, keys)
	arena := make([]txn.Access, 4*n)
	h := make([]Txn, n)
	for i := range h {
		a := arena[4*i : 4*i+4 : 4*i+4]
		for j := range 2 {
			k := r.IntN(keys)
			a[j] = acc(names[k], version[k])
		}
		for j := 2; j < 4; j++ {
			k := r.IntN(keys)
			if j == 3 && names[k] == a[2].Key {
				k = (k + 1) % keys
			}
			version[k]++
			a[j] = acc(names[k], version[k])
		}
		h[i] = Txn{Reads: a[:2], Writes: a[2:]}
	}
	start := time.Now()
	if err := Serializable(h); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d transactions checked in %v", n, time.Since(start))
	// A transaction that read an old version of a record it wrote (a
	// lost update) makes a cycle with the writer in between (checked on a
	// tenth of the history, to keep the test short).
	i := n / 10
	for h[i].Writes[0].Version < 2 {
		i--
	}
	w := h[i].Writes[0]
	h[i].Reads = []txn.Access{acc(w.Key, w.Version-2)}
	var ce *CycleError
	if err := Serializable(h[:i+1]); !errors.As(err, &ce) || !slices.Contains(ce.Txns(), i) || len(ce.Cycle) != 2 {
		t.Fatalf("a lost update in T%d passed or was misreported: %v", i, err)
	}
}
