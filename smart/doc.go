// Package smart is rdmakit's scalability runtime after Smart (Ren et al.,
// ASPLOS '24; ../shared/spec/smart.md): the three techniques that keep
// IOPS-bound applications scaling, each switchable for ablation and
// observable.
//
//   - Adaptive work-request throttling (Algorithm 1): a worker's credit
//     counter bounds its outstanding work requests (Throttle), and an epoch
//     tuner (Tuner) picks the bound that completes the most requests,
//     trying 4, 6, 8, 10, 12 and "unlimited" (256) for Δ each, then keeping
//     the winner for a stable phase T.
//   - Conflict avoidance: truncated exponential backoff after a failed
//     retry with a dynamic limit driven by the retry rate (its base one
//     round trip: fixed, or the worker's measured one), and throttling
//     of the number of tasks a worker runs at once (Backoff): a task
//     waiting for its turn parks on a slot the throttle withholds.
//   - Worker-aware resources: workers owning a CQ, a QP per remote node
//     and their credits (granted in arrival order), running tasks
//     coroutine-style.
//
// A task posts one list to one node and parks until it completes (Do,
// and the one-request helpers), or a round of lists to several nodes at
// once and parks until all completed (DoAll: one round trip, as a
// transaction's validation or commit needs); Worker.Post posts a list
// without waiting for it.
//
// The algorithms take their clock and measurements as inputs, so they are
// tested against injected throughput curves and retry rates rather than
// against whatever the machine does today.
package smart
