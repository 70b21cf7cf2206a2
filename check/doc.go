// Package check verifies protocols instead of trusting them: histories of
// concurrent operations recorded by tests and experiments are checked for
// linearizability with porcupine against a sequential model.
package check
