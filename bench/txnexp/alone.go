package txnexp

import "runtime"

// The experiments measure one system at a time. A system's servers start
// before its points and stop after them, its client is closed and its
// histories are dropped before the next system starts: an idle system's
// node processes would otherwise take CPU from the measured one (a node
// that polls costs a share of a core even with no work), and the garbage
// collector would keep walking the finished systems' histories (every
// committed transaction's reads and writes) while the next one runs.

// aloneNote states the method in the experiments' notes.
const aloneNote = "Method: each system measured alone: its servers started before its points and stopped after; no other system's processes running " +
	"(its client closed, its histories checked and dropped, and the heap collected, before the next system starts)."

// settle runs between two systems, once the first is stopped and its
// histories dropped: a collection now leaves the next system a small
// heap and no garbage of the last one's to collect while it is measured.
func settle() { runtime.GC() }
