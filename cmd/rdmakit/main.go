// Command rdmakit is rdmakit's command-line tool: a demo, a memory node,
// key-value store nodes and clients, transactional memory nodes and
// their benchmark,
// perftest-style measurements of verbs devices (in one process or against
// a node), the experiment harness and version information.
//
// Usage:
//
//	rdmakit demo [--keys 100000] [--duration 2s]
//	rdmakit demo verbs
//	rdmakit kv serve [--store pilaf|prism-kv|race|smart-ht] [--listen HOST:PORT] [--device URI] [--token-file F]
//	rdmakit kv get|put|del --node HOST:PORT [--store S] KEY [VALUE]
//	rdmakit kv bench --node HOST:PORT [--store S] [--workload a|b|c|d|f] [--load]
//	rdmakit btree serve [--design sherman|rpc] [--listen HOST:PORT] [--device URI] [--mem BYTES] [--token-file F]
//	rdmakit btree get|put|del|scan --node HOST:PORT [--design D] [KEY [VALUE]]
//	rdmakit btree bench --node HOST:PORT [--design D] [--workload a|b|c|e] [--load] [--records N] [--tasks N]
//	rdmakit txn serve --protocol farm|prism-tx|ford [--listen HOST:PORT] [--device URI] [--token-file F]
//	rdmakit txn bench --protocol farm|prism-tx|ford --nodes A,B,C [--workload smallbank|tatp|ycsb-t] [--load] [--check]
//	rdmakit txn recover --protocol ford --nodes A,B,C [--coordinator ID] [--sweep]
//	rdmakit sock serve --listen URI [--app echo|sink|http]
//	rdmakit objstore serve [--mem 1GiB] [--socket PATH|@NAME] [--listen HOST:PORT] [--tcp-listen HOST:PORT] [--peers A,B] [--protocol hybrid|sendrecv|read|tcp4k|tcpbulk] [--threshold 32KiB] [--stats HOST:PORT]
//	rdmakit objstore put|get|ls|rm|fetch --socket PATH|@NAME [FILE|ID…]
//	rdmakit objstore tune [--peer HOST:PORT --peer-socket S] [--sizes …] [--runs N]
//	rdmakit node [--uri tcp://HOST:PORT] [--cm HOST:PORT] [--mem 64MiB] [--mrs N] [--metrics HOST:PORT] [--echo] [--token-file F]
//	rdmakit perf [--uri URI] [--op read|write|send|cas|faa|all] [--test lat|bw|both] [--sizes 8-1048576]
//	rdmakit perf --connect HOST:PORT [--op …] [--test …] [--size N]
//	rdmakit bench list
//	rdmakit bench run NAME [--quick] [--duration D] [--out DIR]
//	rdmakit version
//
// Auth tokens (node, kv, perf --connect) come from --token-file F or
// $RDMAKIT_TOKEN, or --token, which other local users can read in /proc.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rdmakit/rdmakit/nic"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	dumpQPsOnSignal(syscall.SIGUSR1)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dumpQPsOnSignal writes the state of this process's waiting QPs
// (nic.DumpQPs) to stderr each time sig arrives: `kill -USR1 PID` shows
// what a stuck server's requests wait for, and the process goes on.
func dumpQPsOnSignal(sig os.Signal) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig)
	go func() {
		for range ch {
			fmt.Fprintln(os.Stderr, "rdmakit: QPs that wait (SIGUSR1):")
			nic.DumpQPs(os.Stderr)
		}
	}()
}

// run executes the command line and returns the exit code; errors are
// printed to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var prof profiling
	root := newRootCmd(stdout, stderr, &prof)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	prof.stop()
	if err != nil {
		fmt.Fprintln(stderr, "rdmakit:", err)
		return 1
	}
	return 0
}
