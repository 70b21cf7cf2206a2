// Package verbstest is the conformance suite every verbs provider must
// pass. It is table-driven: Cases lists every case by name, Run runs them
// all as subtests against a Provider that opens fresh, mutually reachable
// devices for each case.
//
// A transport's test runs it with a few lines:
//
//	func TestConformance(t *testing.T) { verbstest.Run(t, myProvider{}) }
//
// Cases that need fault injection (killing, pausing, partitioning a node,
// added latency) use the optional interfaces Killer, Pauser, Partitioner
// and Delayer, and skip when the provider does not implement them.
//
// Every case asserts behaviour; none uses timing to decide pass or fail
// except as a generous deadline (WaitTimeout) that turns a hang into a
// failure, and except where absence of an event must be shown, where it
// waits a short QuietPeriod.
package verbstest

import (
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Provider opens fresh, mutually reachable devices for one test case.
type Provider interface {
	// Name names the provider in messages, e.g. "loop".
	Name() string
	// Open returns n devices that can reach each other (e.g. n nodes of a
	// fresh loop fabric). The suite closes them via t.Cleanup.
	Open(t testing.TB, n int) []verbs.Device
}

// Killer is implemented by providers that can crash a device: its QPs move
// to ERROR and flush, and every request of its peers to it completes with
// StatusRetryExcErr.
type Killer interface {
	// Kill crashes d; failures to do so fail t.
	Kill(t testing.TB, d verbs.Device)
}

// Pauser is implemented by providers that can freeze a device's network:
// requests to and from it wait, and fail with StatusRetryExcErr when the
// pause outlasts their QP's retry budget.
type Pauser interface {
	// Pause freezes d's network.
	Pause(t testing.TB, d verbs.Device)
	// Resume ends a Pause.
	Resume(t testing.TB, d verbs.Device)
}

// Partitioner is implemented by providers that can cut the link between
// two devices; requests between them behave as with a paused device.
type Partitioner interface {
	// Partition cuts the link between a and b.
	Partition(t testing.TB, a, b verbs.Device)
	// Heal restores the link between a and b.
	Heal(t testing.TB, a, b verbs.Device)
}

// Delayer is implemented by providers that can add one-way latency to the
// link between two devices; zero removes it.
type Delayer interface {
	// SetLatency sets the one-way delay of the a–b link to d.
	SetLatency(t testing.TB, a, b verbs.Device, d time.Duration)
}

// Case is one named conformance case.
type Case struct {
	// Name is the subtest name.
	Name string
	// Run runs the case against a provider.
	Run func(t *testing.T, p Provider)
}

// WaitTimeout bounds every wait of the suite: a completion, a state
// change or a wake-up that does not happen within it fails the case.
const WaitTimeout = 5 * time.Second

// QuietPeriod is how long the suite watches for an event that must not
// happen (a completion of an unsignaled request, a wake-up of a CQ armed
// for solicited events only, a dropped datagram).
const QuietPeriod = 30 * time.Millisecond

// Cases returns every conformance case, in the order Run runs them.
func Cases() []Case {
	var cs []Case
	for _, group := range [][]Case{
		resourceCases(),
		opcodeCases(),
		atomicCases(),
		flagCases(),
		errorCases(),
		orderCases(),
		transportCases(),
		udCases(),
		cqCases(),
		contentionCases(),
		prismCases(),
		chainCases(),
		operandCases(),
		allocateCases(),
		faultCases(),
		isolationCases(),
	} {
		cs = append(cs, group...)
	}
	return cs
}

// Run runs every case of Cases as a subtest of t.
func Run(t *testing.T, p Provider) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) { c.Run(t, p) })
	}
}

// parallel wraps a case body that is safe to run alongside others: it
// uses only its own devices.
func parallel(name string, f func(t *testing.T, p Provider)) Case {
	return Case{Name: name, Run: func(t *testing.T, p Provider) {
		t.Parallel()
		f(t, p)
	}}
}

// serial wraps a case body that should run alone (heavy contention, or
// waits whose deadlines should not compete with other cases for CPU).
func serial(name string, f func(t *testing.T, p Provider)) Case {
	return Case{Name: name, Run: f}
}
