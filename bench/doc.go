// Package bench is rdmakit's experiment harness. An Experiment is a named
// measurement registered with Register; Run executes one with Options
// and writes its Result as JSON (NAME.json), a Markdown table (NAME.md)
// and a PNG plot (NAME.png). Every Result carries Meta: the machine, Go
// runtime, transport and polling policy that produced it, because
// numbers from noisy shared machines are context, not truth.
//
// The perf experiment (perftest-style latency and bandwidth of READ,
// WRITE, SEND, CAS and FAA over the loop fabric) is registered by this
// package; the measurements themselves live in bench/perf and the
// latency statistics in bench/stats. bench/peers runs the comparison
// programs (sockperf, ucx_perftest) that experiments measure side by
// side; docs/peers.md says what their numbers mean.
package bench
