// Package check verifies protocols instead of trusting them: histories of
// concurrent operations recorded by tests and experiments are checked for
// linearizability with porcupine against a sequential model (KVModel,
// RegisterModel), and histories of committed transactions for
// serializability (Serializable, History): the direct serialization
// graph of Adya's thesis — ww, wr and rw dependencies from the version
// of every record each transaction read and wrote (txn.Traced) — must
// have no cycle, every version read must have a committed writer (an
// aborted transaction left nothing visible) and no two writers may
// install one version.
package check
