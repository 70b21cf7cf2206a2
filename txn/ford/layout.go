package ford

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"

	"github.com/rdmakit/rdmakit/txn"
)

// Layout is a database's shape in its memory nodes' regions. Every
// client of a database must use the same Layout (and the same node
// order): the first client writes its fingerprint into each node's
// header, and a client with another one is refused (ErrLayout).
type Layout struct {
	// F is the number of backups of each shard (default 1): shard s
	// lives on nodes s, s+1, …, s+F (mod nodes), the first its primary.
	F int
	// Buckets is the slots of each shard's table (default 4096): the most
	// keys a shard holds, deleted ones included.
	Buckets int
	// ValueSize is the largest value a slot holds (default txn.MaxValue).
	ValueSize int
	// Coordinators is the coordinator ids each node hosts, each with a
	// log area there and a copy of it on each of the F next nodes
	// (default 64).
	Coordinators int
	// LogSize is the bytes of one coordinator's log area (default
	// 32 KiB): a transaction whose log record is larger aborts with
	// ErrTooLarge.
	LogSize int
}

// Defaults and bounds of Layout.
const (
	DefaultBuckets      = 4096
	DefaultCoordinators = 64
	DefaultLogSize      = 32 << 10
	// MaxProbe is how far from its home slot a key may live (bounded
	// linear probing, keys never move): a lookup READs at most this many
	// slots. At a table half full a window holds 32 keys on average; 16
	// left TATP's million records (txn-peers) without a slot for some.
	MaxProbe = 64
	// FirstProbe is how many slots of its window a lookup READs first.
	FirstProbe = 4
	// maxCoordIDs is the coordinator ids a lock word can name (15 bits).
	maxCoordIDs = 1 << 15
)

// ErrLayout: a layout the nodes cannot hold, or a node holding another
// database's layout.
var ErrLayout = errors.New("ford: bad layout")

func (l *Layout) defaults() {
	if l.F == 0 {
		l.F = 1
	}
	if l.Buckets == 0 {
		l.Buckets = DefaultBuckets
	}
	if l.ValueSize == 0 {
		l.ValueSize = txn.MaxValue
	}
	if l.Coordinators == 0 {
		l.Coordinators = DefaultCoordinators
	}
	if l.LogSize == 0 {
		l.LogSize = DefaultLogSize
	}
}

// check validates a layout with its defaults set, for nodes nodes.
func (l *Layout) check(nodes int) error {
	switch {
	case nodes < 2 || nodes > 255:
		return fmt.Errorf("%w: %d nodes (2 to 255)", ErrLayout, nodes)
	case l.F < 0 || l.F >= nodes:
		return fmt.Errorf("%w: %d backups of %d nodes (0 to nodes-1)", ErrLayout, l.F, nodes)
	case l.Buckets < MaxProbe || l.Buckets > 1<<24:
		return fmt.Errorf("%w: %d buckets (%d to 2^24)", ErrLayout, l.Buckets, MaxProbe)
	case l.ValueSize < 1 || l.ValueSize > txn.MaxValue:
		return fmt.Errorf("%w: values of %d bytes (1 to %d)", ErrLayout, l.ValueSize, txn.MaxValue)
	case l.Coordinators < 1 || nodes*l.Coordinators > maxCoordIDs:
		return fmt.Errorf("%w: %d coordinators per node (1 to %d in all)", ErrLayout, l.Coordinators, maxCoordIDs)
	case l.LogSize < logHead+entryHead+txn.MaxKey+64 || l.LogSize > 1<<24 || l.LogSize%64 != 0:
		return fmt.Errorf("%w: a %d-byte log area (a multiple of 64, %d to 2^24)", ErrLayout, l.LogSize, (logHead+entryHead+txn.MaxKey+64+63)&^63)
	}
	return nil
}

// A node's region, from offset 0:
//
//	[0, 64)            header: the layout's fingerprint (word 0)
//	[claims, +8·C)             coordinator claim words, one per coordinator id
//	[logs, +LogSize·C·(F+1))   coordinator log areas: copy j of the log of
//	                           coordinator id is area j·C + id mod C of node
//	                           (id div C + j) mod nodes
//	[tables, …)                F+1 tables: copy i is shard (node − i) mod nodes
const (
	headerSize = 64
	offClaims  = headerSize
)

func (l *Layout) offLogs() int64 { return offClaims + int64(l.Coordinators*8+63)&^63 }

func (l *Layout) offTables() int64 {
	return l.offLogs() + int64(l.F+1)*int64(l.Coordinators)*int64(l.LogSize)
}

// SlotSize is the bytes of one slot: header, key, value, rounded up to
// 64.
func (l *Layout) SlotSize() int { return (slotValue + l.ValueSize + 63) &^ 63 }

// NodeBytes is the region size each memory node must serve (memnode's
// Config.Memory with one region) for this layout.
func (l Layout) NodeBytes() int64 {
	l.defaults()
	return (l.offTables() + int64(l.F+1)*int64(l.Buckets)*int64(l.SlotSize()) + 63) &^ 63
}

// copyIndex is the index of shard s's copy among node n's tables, -1
// when n holds no copy of s.
func (l *Layout) copyIndex(n, s, nodes int) int {
	i := (n - s + nodes) % nodes
	if i > l.F {
		return -1
	}
	return i
}

// slotOff is the offset of slot i of shard s's copy on node n.
func (l *Layout) slotOff(n, s, i, nodes int) int64 {
	c := l.copyIndex(n, s, nodes)
	return l.offTables() + (int64(c)*int64(l.Buckets)+int64(i))*int64(l.SlotSize())
}

// home is key hash h's first slot: probing never wraps, so a key's
// window is [home, home+MaxProbe). The hash is mixed again first:
// txn.Shard took h mod shards.
func (l *Layout) home(h uint64) int {
	h ^= h >> 31
	h *= 0x9e3779b97f4a7c15
	h ^= h >> 29
	return int(h % uint64(l.Buckets-MaxProbe+1))
}

// layoutVersion changes with the region's format (2: F+1 log copies).
const layoutVersion = 3 // 3: windows of 64 slots

// fingerprint identifies the layout on nodes nodes: never 0 (an
// unformatted header).
func (l *Layout) fingerprint(nodes int) uint64 {
	var b []byte
	for _, v := range []int{layoutVersion, nodes, l.F, l.Buckets, l.ValueSize, l.Coordinators, l.LogSize} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	f := crc64.Checksum(b, crcTable) | 1
	return f
}

var crcTable = crc64.MakeTable(crc64.ECMA)
