package nic

import "github.com/rdmakit/rdmakit/verbs"

// PRISM chaining. A QP remembers whether its last completed request
// succeeded (prevOK), counting a compare-and-swap whose comparison did not
// hold as a failure; a CONDITIONAL request runs only if it did. When
// nothing of the QP is in flight the requester decides at post time; when
// earlier requests are still at a responder in another process, the
// responder decides, in order (Session.Serve keeps the same flag per
// requester QP).

// cmpHeld reports whether an atomic whose original value was orig
// "succeeded" for chaining: a CAS whose comparison held; any other
// atomic.
func cmpHeld(op verbs.Opcode, a *verbs.AtomicArgs, orig *[4]uint64) bool {
	if op == verbs.OpAtomicCmpAndSwp {
		return orig[0] == a.Compare[0]
	}
	if op == verbs.OpMaskedCmpAndSwp {
		return compare(orig, a, int(a.Size/8))
	}
	return true
}

// noteAtomic records, before the completion of an atomic with original
// value orig, whether it counts as a success for chaining.
func (q *QP) noteAtomic(wr *verbs.SendWR, orig *[4]uint64) {
	if !cmpHeld(wr.Opcode, &wr.Atomic, orig) {
		q.send.failedCmp = true
	}
}

// conditionLocked decides a CONDITIONAL request at post time when nothing
// earlier of the QP is outstanding. It reports whether the request must be
// skipped.
func (q *QP) skipLocked(wr *verbs.SendWR) bool {
	return wr.Flags&verbs.FlagConditional != 0 && !q.send.prevOK
}

// prismFlags are the PRISM flags a QP of type t accepts.
func prismFlags(t verbs.QPType) verbs.SendFlags {
	if t == verbs.RC {
		return verbs.FlagIndirect | verbs.FlagBounded | verbs.FlagConditional | verbs.FlagIndirectArg | verbs.FlagRedirect
	}
	return 0
}
