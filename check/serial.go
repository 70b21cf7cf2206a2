package check

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rdmakit/rdmakit/txn"
)

// Txn is one committed transaction as its protocol traced it
// (txn.Traced): the version of every record it read and the version
// each of its writes installed.
type Txn struct {
	Reads, Writes []txn.Access
}

// DepKind is the kind of a direct dependency between two committed
// transactions (Adya, Liskov and O'Neil, ICDE'00).
type DepKind uint8

// Kinds of dependencies.
const (
	// WW: the second installed the next version of a record the first
	// wrote (write dependency).
	WW DepKind = iota + 1
	// WR: the second read the version the first installed (read
	// dependency).
	WR
	// RW: the first read a version the second replaced by the next one
	// (anti-dependency).
	RW
)

// String names the dependency as Adya does.
func (k DepKind) String() string {
	switch k {
	case WW:
		return "ww"
	case WR:
		return "wr"
	case RW:
		return "rw"
	}
	return fmt.Sprintf("DepKind(%d)", uint8(k))
}

// Dep is one edge of the direct serialization graph: From must come
// before To in any serial order, because of Key.
type Dep struct {
	From, To int // indexes of the transactions in the history
	Kind     DepKind
	Key      string
}

// ErrNotSerializable: a history has no equivalent serial order, or shows
// a write no committed transaction made. Every error Serializable
// returns wraps it.
var ErrNotSerializable = errors.New("check: not serializable")

// CycleError is a cycle of the direct serialization graph: Cycle[i].To
// is Cycle[i+1].From and the last edge returns to the first's From.
type CycleError struct {
	Cycle []Dep
	// Components is the number of strongly connected components of the
	// graph with a cycle: each holds at least one anomaly.
	Components int
}

// Class names the anomaly as Adya does: G0 (write cycle: ww edges only),
// G1c (circular information flow: ww and wr) or G2 (with an
// anti-dependency: write skew, lost update).
func (e *CycleError) Class() string {
	class := "G0"
	for _, d := range e.Cycle {
		switch {
		case d.Kind == RW:
			return "G2"
		case d.Kind == WR:
			class = "G1c"
		}
	}
	return class
}

// Error lists the cycle.
func (e *CycleError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "check: not serializable: %s cycle of %d transactions (one of %d cyclic components): T%d",
		e.Class(), len(e.Cycle), e.Components, e.Cycle[0].From)
	for _, d := range e.Cycle {
		fmt.Fprintf(&b, " -%s(%q)-> T%d", d.Kind, d.Key, d.To)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrNotSerializable) hold.
func (e *CycleError) Is(target error) bool { return target == ErrNotSerializable }

// Txns returns the transactions of the cycle, in its order.
func (e *CycleError) Txns() []int {
	out := make([]int, len(e.Cycle))
	for i, d := range e.Cycle {
		out[i] = d.From
	}
	return out
}

// ReadError is a read of a version that no committed transaction
// installed (Adya's G1a when an aborted transaction wrote it: an aborted
// or phantom write was visible), or a read that disagrees with the
// version it names about whether the record existed.
type ReadError struct {
	Txn     int
	Key     string
	Version uint64
	Deleted bool // the read found no record
	// Writer is the transaction that installed Version (then the read
	// disagrees about the record's existence), -1 for none.
	Writer int
}

// Error says which read.
func (e *ReadError) Error() string {
	if e.Writer < 0 {
		return fmt.Sprintf("check: not serializable: T%d read version %d of %q, which no committed transaction wrote (an aborted or phantom write visible)",
			e.Txn, e.Version, e.Key)
	}
	return fmt.Sprintf("check: not serializable: T%d read version %d of %q as deleted=%v, but T%d installed it as deleted=%v",
		e.Txn, e.Version, e.Key, e.Deleted, e.Writer, !e.Deleted)
}

// Is makes errors.Is(err, ErrNotSerializable) hold.
func (e *ReadError) Is(target error) bool { return target == ErrNotSerializable }

// WriteError is two committed writes installing the same version of a
// record (Txns differ, or a transaction wrote a key twice), or a write
// installing version 0, which is the record before any write.
type WriteError struct {
	Key     string
	Version uint64
	Txns    [2]int // the second is -1 for a write of version 0
}

// Error says which writes.
func (e *WriteError) Error() string {
	if e.Txns[1] < 0 {
		return fmt.Sprintf("check: not serializable: T%d installed version 0 of %q (version 0 is the record before any write)", e.Txns[0], e.Key)
	}
	return fmt.Sprintf("check: not serializable: T%d and T%d both installed version %d of %q", e.Txns[0], e.Txns[1], e.Version, e.Key)
}

// Is makes errors.Is(err, ErrNotSerializable) hold.
func (e *WriteError) Is(target error) bool { return target == ErrNotSerializable }

// maxReported bounds the read and write errors Serializable lists.
const maxReported = 10

// Serializable checks a history of committed transactions (transaction i
// is txns[i]) for conflict serializability: it builds the direct
// serialization graph — ww edges between consecutive versions of each
// record (versions are ordered by number, as protocols install them),
// wr edges from the writer of each version read to its reader, rw edges
// from each reader of a version to the writer of the next one — and
// looks for a cycle (Tarjan's strongly connected components, iterative:
// millions of transactions need no deep stack). It returns nil, or an
// error wrapping ErrNotSerializable that joins the first write and read
// errors (*WriteError, *ReadError; a graph built on them would mean
// little, so the cycle search is skipped) or else one *CycleError: a
// cycle of two transactions if it finds one (a lost update, a write
// skew), else a short cycle of the first cyclic component.
//
// Version 0 of a record is the record before any write (absent, or as
// loaded outside transactions); a read of version 0 needs no writer. A
// read that found no record (Deleted) names the version of the delete
// that removed it, 0 if the record never existed: a protocol that forgets
// deleted records' versions would make such reads look stale.
func Serializable(txns []Txn) error {
	g, errs := buildGraph(txns)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if cycle, comps := g.findCycle(); cycle != nil {
		for i := range cycle {
			cycle[i].Key = g.keyOf(txns, cycle[i])
		}
		return &CycleError{Cycle: cycle, Components: comps}
	}
	return nil
}

// write is one installed version: record key (interned) got version ver
// from transaction tx.
type write struct {
	key int32
	tx  int32
	ver uint64
	del bool
}

// graph is the direct serialization graph in compressed sparse rows:
// transaction i's edges are to[start[i]:start[i+1]], of kinds
// kind[...].
type graph struct {
	start []int32
	to    []int32
	kind  []DepKind
	keys  []string // interned key names
}

// buildGraph interns the keys, orders each record's versions and makes
// the edges, or returns the write and read errors it found.
func buildGraph(txns []Txn) (*graph, []error) {
	ids := make(map[string]int32)
	g := &graph{}
	intern := func(k string) int32 {
		id, ok := ids[k]
		if !ok {
			id = int32(len(g.keys))
			ids[k] = id
			g.keys = append(g.keys, k)
		}
		return id
	}
	nw, nr := 0, 0
	for _, t := range txns {
		nw += len(t.Writes)
		nr += len(t.Reads)
	}
	writes := make([]write, 0, nw)
	readKeys := make([]int32, 0, nr) // every read's key, in the order of txns and their reads
	for i, t := range txns {
		for _, w := range t.Writes {
			writes = append(writes, write{key: intern(w.Key), tx: int32(i), ver: w.Version, del: w.Deleted})
		}
		for _, r := range t.Reads {
			readKeys = append(readKeys, intern(r.Key))
		}
	}
	byKey, first := sortWrites(writes, len(g.keys))
	var errs []error
	for i := 0; i < len(byKey); i++ {
		w := byKey[i]
		switch {
		case w.ver == 0:
			errs = append(errs, &WriteError{Key: g.keys[w.key], Txns: [2]int{int(w.tx), -1}})
		case i+1 < len(byKey) && byKey[i+1].key == w.key && byKey[i+1].ver == w.ver:
			errs = append(errs, &WriteError{Key: g.keys[w.key], Version: w.ver, Txns: [2]int{int(w.tx), int(byKey[i+1].tx)}})
		}
	}
	e, readErrs := resolve(txns, readKeys, byKey, first)
	errs = append(errs, readErrs...)
	if len(errs) > 0 {
		return nil, errs[:min(len(errs), maxReported)]
	}
	g.start = make([]int32, len(txns)+1)
	e.emit(func(from, _ int32, _ DepKind) { g.start[from+1]++ })
	for i := range txns {
		g.start[i+1] += g.start[i]
	}
	n := g.start[len(txns)]
	g.to, g.kind = make([]int32, n), make([]DepKind, n)
	fill := slices.Clone(g.start[:len(txns)])
	e.emit(func(from, to int32, k DepKind) {
		g.to[fill[from]], g.kind[fill[from]] = to, k
		fill[from]++
	})
	return g, nil
}

// sortWrites groups writes by key (counting sort) and orders each key's
// by version; record k's writes are out[first[k]:first[k+1]].
func sortWrites(writes []write, keys int) (out []write, first []int32) {
	first = make([]int32, keys+1)
	for _, w := range writes {
		first[w.key+1]++
	}
	for k := range keys {
		first[k+1] += first[k]
	}
	out = make([]write, len(writes))
	fill := slices.Clone(first[:keys])
	for _, w := range writes {
		out[fill[w.key]] = w
		fill[w.key]++
	}
	for k := range keys {
		seg := out[first[k]:first[k+1]]
		if !slices.IsSortedFunc(seg, byVersion) {
			slices.SortStableFunc(seg, byVersion)
		}
	}
	return out, first
}

// byVersion orders one record's writes.
func byVersion(a, b write) int {
	switch {
	case a.ver < b.ver:
		return -1
	case a.ver > b.ver:
		return 1
	}
	return 0
}

// edges makes the graph's edges from the ordered writes and the
// resolved reads.
type edges struct {
	byKey []write
	// Each read's transaction, the writer of the version it read and the
	// writer of the next version (-1: none, or the reader itself).
	reader, wr, rw []int32
}

// resolve finds, for each read, the writer of its version and of the
// next one (readKeys lists every read's key, in the order of txns and
// their reads), and returns the read errors.
func resolve(txns []Txn, readKeys []int32, byKey []write, first []int32) (*edges, []error) {
	n := len(readKeys)
	e := &edges{byKey: byKey, reader: make([]int32, n), wr: make([]int32, n), rw: make([]int32, n)}
	var errs []error
	i := 0
	for t, txn := range txns {
		self := int32(t)
		for _, r := range txn.Reads {
			k := readKeys[i]
			seg := byKey[first[k]:first[k+1]]
			next := searchVersion(seg, r.Version)
			e.reader[i], e.wr[i], e.rw[i] = self, -1, -1
			found := next < len(seg) && seg[next].ver == r.Version
			switch {
			case r.Version == 0:
			case !found:
				errs = append(errs, &ReadError{Txn: t, Key: r.Key, Version: r.Version, Deleted: r.Deleted, Writer: -1})
			case seg[next].del != r.Deleted:
				errs = append(errs, &ReadError{Txn: t, Key: r.Key, Version: r.Version, Deleted: r.Deleted, Writer: int(seg[next].tx)})
			default:
				if w := seg[next].tx; w != self {
					e.wr[i] = w
				}
				next++
			}
			if next < len(seg) && seg[next].tx != self {
				e.rw[i] = seg[next].tx
			}
			i++
		}
	}
	return e, errs
}

// searchVersion returns the index of the first write of seg (one
// record's, in version order) whose version is at least v.
func searchVersion(seg []write, v uint64) int {
	lo, hi := 0, len(seg)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if seg[m].ver < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// emit calls add for every edge (self-edges left out).
func (e *edges) emit(add func(from, to int32, k DepKind)) {
	for i := 0; i+1 < len(e.byKey); i++ {
		a, b := e.byKey[i], e.byKey[i+1]
		if a.key == b.key && a.tx != b.tx {
			add(a.tx, b.tx, WW)
		}
	}
	for i, t := range e.reader {
		if w := e.wr[i]; w >= 0 {
			add(w, t, WR)
		}
		if w := e.rw[i]; w >= 0 {
			add(t, w, RW)
		}
	}
}

// keyOf names a key that makes edge d: one the two transactions'
// traces share in d's roles and versions.
func (g *graph) keyOf(txns []Txn, d Dep) string {
	from, to := txns[d.From], txns[d.To]
	first, second := from.Writes, to.Writes
	match := func(a, b txn.Access) bool { return b.Version > a.Version }
	switch d.Kind {
	case WR:
		second = to.Reads
		match = func(a, b txn.Access) bool { return b.Version == a.Version }
	case RW:
		first = from.Reads
	}
	for _, a := range first {
		for _, b := range second {
			if a.Key == b.Key && match(a, b) {
				return a.Key
			}
		}
	}
	return ""
}
