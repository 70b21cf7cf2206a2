package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/txn/farm"
)

// freeTCPAddr returns a loopback address nothing listens on.
func freeTCPAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serveTxnNodes runs three `txn serve --protocol protocol` in this
// process until the test ends and returns their addresses, joined.
func serveTxnNodes(t *testing.T, protocol string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var addrs []string
	served := make(chan string, 3)
	for range 3 {
		addr := freeTCPAddr(t)
		addrs = append(addrs, addr)
		go func() {
			var out, errs bytes.Buffer
			if code := run(ctx, []string{"txn", "serve", "--protocol", protocol, "--listen", addr, "--slots", "8192", "--memory", "16MiB", "--buckets", "8192"}, &out, &errs); code != 0 {
				served <- fmt.Sprintf("exit %d: %s", code, errs.String())
				return
			}
			served <- ""
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range 3 {
			if msg := <-served; msg != "" {
				t.Errorf("a %s node: %s", protocol, msg)
			}
		}
	})
	return strings.Join(addrs, ",")
}

// txnBench runs `txn bench` with args against nodes, retrying while the
// nodes are still starting.
func txnBench(nodes string, args ...string) (string, int) {
	var out, errs bytes.Buffer
	code := -1
	for range 50 {
		out.Reset()
		errs.Reset()
		code = run(context.Background(), append([]string{"txn", "bench", "--nodes", nodes, "--timeout", "5s"}, args...), &out, &errs)
		if code == 0 || !strings.Contains(errs.String(), "connection refused") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out.String() + errs.String(), code
}

// TestTxnCommands: three `txn serve` nodes per protocol, then `txn
// bench` of every workload, SmallBank with --load --check (the checker's
// and the money's verdicts printed), and the refusals a user meets
// first.
func TestTxnCommands(t *testing.T) {
	for _, p := range []string{protoFarm, protoPrismTX, protoFord} {
		t.Run(p, func(t *testing.T) {
			nodes := serveTxnNodes(t, p)
			out, code := txnBench(nodes, "--protocol", p, "--workload", "smallbank", "--records", "500", "--clients", "4",
				"--duration", "150ms", "--load", "--check", "--buckets", "8192")
			if code != 0 {
				t.Fatalf("bench smallbank: %d %s", code, out)
			}
			mustContain(t, out, p+" SmallBank (500 accounts, 20 hot), 4 clients", "loaded", "txn/s", "p50", "p99",
				"per committed transaction (lock-conflict", "round trips", "serializable  yes: no cycle among", "money         holds")
			if p == protoFord {
				checkFordCommitTrips(t, out)
			}
			// The same nodes hold other tables (FaRM: the same layout,
			// room for all): TATP loaded, YCSB-T written by its first
			// transactions.
			if out, code := txnBench(nodes, "--protocol", p, "--workload", "tatp", "--records", "100", "--duration", "100ms", "--load", "--check", "--buckets", "8192"); code != 0 {
				t.Errorf("bench tatp: %d %s", code, out)
			} else {
				mustContain(t, out, "TATP (100 subscribers)", "serializable  yes")
			}
			ycsb := []string{"--protocol", p, "--workload", "ycsb-t", "--records", "300", "--zipf", "0.9", "--duration", "100ms", "--buckets", "8192"}
			if p == protoFord {
				ycsb = append(ycsb, "--backup-reads")
			}
			if out, code := txnBench(nodes, ycsb...); code != 0 {
				t.Errorf("bench ycsb-t: %d %s", code, out)
			} else {
				mustContain(t, out, "YCSB-T (300 keys, zipf 0.90)", "txn/s")
			}
		})
	}
}

// Bad input: a refusal with its reason and a non-zero exit, never a
// panic; the flag refusals wrap errTxnFlag.
func TestTxnBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"txn", "serve", "--protocol", "nope"}, "--protocol"},
		{[]string{"txn", "serve", "--protocol", "prism-tx", "--slots", "0"}, "--slots"},
		{[]string{"txn", "serve", "--protocol", "prism-tx", "--memory", "lots"}, "--memory"},
		{[]string{"txn", "serve", "--protocol", "farm", "--lease", "0s"}, "--lease"},
		{[]string{"txn", "serve", "--protocol", "farm", "--log-size", "1000"}, "--log-size"},
		{[]string{"txn", "serve", "--protocol", "farm", "--members", "a:1,a:1,b:2"}, "--members"},
		{[]string{"txn", "serve", "--protocol", "farm", "--members", "nohostport"}, "--members"},
		{[]string{"txn", "bench", "--protocol", "farm"}, "--nodes"},
		{[]string{"txn", "bench", "--protocol", "nope", "--nodes", "a:1"}, "--protocol"},
		{[]string{"txn", "bench", "--protocol", "farm", "--nodes", "a:1,a:1"}, "twice"},
		{[]string{"txn", "bench", "--protocol", "farm", "--nodes", "a:1", "--workload", "tpcc"}, "--workload"},
		{[]string{"txn", "bench", "--protocol", "farm", "--nodes", "a:1", "--clients", "0"}, "--clients"},
		{[]string{"txn", "bench", "--protocol", "farm", "--nodes", "a:1", "--check"}, "--check needs --load"},
		{[]string{"txn", "bench", "--protocol", "farm", "--nodes", "a:1", "--workload", "ycsb-t", "--zipf", "1.5"}, "zipf"},
		{[]string{"txn", "bench", "--protocol", "farm", "--nodes", "a:1,b:2", "--load", "--backups", "2"}, "--backups"},
		{[]string{"txn", "bench", "--protocol", "prism-tx", "--nodes", freeTCPAddr(t), "--timeout", "300ms", "--duration", "10ms"}, ""},
		{[]string{"txn", "client", "--protocol", "farm", "--nodes", "a:1", "--first", "999", "--customers", "5"}, "--first"},
		{[]string{"txn", "client", "--protocol", "farm", "--nodes", "a:1", "--die-at", "logged"}, "--die-at is for --protocol ford"},
		{[]string{"txn", "client", "--protocol", "ford", "--nodes", "a:1", "--die-at", "midway"}, "want one of"},
		{[]string{"txn", "client", "--protocol", "ford", "--nodes", "a:1", "--die-at", "logged", "--die-in", "0"}, "--die-in"},
		{[]string{"txn", "serve", "--protocol", "ford", "--buckets", "3"}, "--buckets"},
		{[]string{"txn", "serve", "--protocol", "ford", "--backups", "0"}, "--backups"},
		{[]string{"txn", "serve", "--protocol", "ford", "--log-size", "1000"}, "--log-size"},
		{[]string{"txn", "serve", "--protocol", "ford", "--coordinators", "0"}, "--coordinators"},
		{[]string{"txn", "serve", "--protocol", "ford", "--value-size", "0"}, "--value-size"},
		{[]string{"txn", "bench", "--protocol", "ford", "--nodes", "a:1,b:2", "--backups", "2"}, "--backups"},
		{[]string{"txn", "bench", "--protocol", "ford", "--nodes", "a:1,b:2", "--lease", "2s"}, "--lease"},
		{[]string{"txn", "recover", "--protocol", "ford", "--nodes", "a:1,b:2"}, "--coordinator ID, --sweep"},
		{[]string{"txn", "recover", "--protocol", "farm", "--nodes", "a:1,b:2", "--sweep"}, "recover is for ford"},
		{[]string{"txn", "recover", "--protocol", "nope", "--nodes", "a:1,b:2", "--sweep"}, "--protocol"},
		{[]string{"txn", "recover", "--protocol", "ford", "--sweep"}, "--nodes"},
	} {
		var out, errs bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errs); code == 0 || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%v: exit %d, %q", c.args, code, errs.String())
		}
	}
	if _, err := txnWorkload("tpcc", 0, 0); !errors.Is(err, errTxnFlag) {
		t.Errorf("txnWorkload(tpcc): %v", err)
	}
	if _, err := txnWorkload("smallbank", -1, 0); !errors.Is(err, errTxnFlag) {
		t.Errorf("txnWorkload(records -1): %v", err)
	}
	if err := checkProtocol("FaRM"); !errors.Is(err, errTxnFlag) {
		t.Errorf("checkProtocol(FaRM): %v", err)
	}
	// `txn serve --coordinators` has one default for both protocols: a
	// FORD node's must be its clients'.
	if farm.DefaultMaxClients != fordCoordinators {
		t.Errorf("txn serve's --coordinators default %d is not FORD clients' %d", farm.DefaultMaxClients, fordCoordinators)
	}
	f := txnClientFlags{backups: 1, valueSize: 64}
	if l, err := f.layout(300000, 3); err != nil || l.Buckets != 1<<18 || l.F != 1 {
		t.Errorf("layout of 300,000 records on 3 nodes: %+v, %v", l, err)
	}
	f.valueSize = 1 << 20
	if _, err := f.layout(10, 3); !errors.Is(err, errTxnFlag) {
		t.Errorf("layout with 1 MiB values: %v", err)
	}
}

// TestTxnExperiments runs `rdmakit bench run txn-ycsbt --quick`,
// txn-peers and txn-smart through the command, so that FaRM, PRISM-TX and FORD start
// their nodes as `rdmakit txn serve` processes: each gives a row at every
// point with a rate, node CPU, round trips and a checked history,
// txn-peers notes FORD's commit round trips and Smart-DTX against FORD,
// and txn-smart has every series' rows.
func TestTxnExperiments(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	res := runExperiment(t, "txn-ycsbt", "--quick", "--duration", "100ms")
	checkTxnRows(t, res, 2, "txn-ycsbt", "tcp")
	res = runExperiment(t, "txn-peers", "--quick", "--duration", "100ms")
	checkTxnRows(t, res, 4, "txn-peers", "tcp", "shm")
	mustContain(t, res.out, "SmallBank's money", "held at the end on:", "FORD over tcp: its read-write SmallBank commits took", "FORD over shm:",
		"Smart-DTX over tcp: FORD's protocol on Smart's runtime", "Smart-DTX over shm:")
	res = runExperiment(t, "txn-smart", "--quick", "--duration", "100ms")
	checkSmartRows(t, res)
}

// checkSmartRows checks txn-smart's quick rows: every series at both
// task counts of both workloads over tcp, each with a rate, round trips
// (commit ones at most FORD's bound of 3) and a checked history; the
// smart series with the runtime's figures; and its notes.
func checkSmartRows(t *testing.T, res experimentResult) {
	t.Helper()
	col := res.col
	rows := map[string]int{}
	for _, r := range res.rows {
		sys := r[col["system"]].(string)
		rows[sys]++
		for _, c := range []string{"rate", "trips", "checked", "commit_trips"} {
			if v, ok := r[col[c]].(float64); !ok || v <= 0 || c == "commit_trips" && v > 3 {
				t.Errorf("txn-smart %s: %s %v: %v", sys, c, r[col[c]], r)
			}
		}
		if _, ok := r[col["n_max"]].(float64); ok != (sys != "FORD") {
			t.Errorf("txn-smart %s: n_max %v", sys, r[col["n_max"]])
		}
	}
	for _, sys := range []string{"FORD", "FORD+", "Smart-DTX", "throttling", "backoff", "coroutine throttle"} {
		if rows[sys] != 4 {
			t.Errorf("txn-smart: %s has %d rows, want 4 (2 workloads × 2 task counts)", sys, rows[sys])
		}
	}
	mustContain(t, res.out, "Smart-DTX against FORD over tcp at 8 tasks per worker", "FORD's read-write SmallBank commits took", "held at the end over: tcp")
}

// checkTxnRows checks an experiment's rows: want of each rdmakit
// protocol over each of transports, each with a rate, round trips, a
// checked history and its node CPU — above 0 for FaRM and PRISM-TX over
// tcp (the node's soft NIC executes every operation), at least 0 for
// FORD (its nodes do no work per transaction: over tcp the soft NIC's
// may stay below /proc's 10 ms ticks in a short point) and over shm
// (one-sided operations never reach the node's CPU; a short, mostly
// read-only point may show none of FaRM's or PRISM-TX's either).
func checkTxnRows(t *testing.T, res experimentResult, want int, name string, transports ...string) {
	t.Helper()
	col := res.col
	rows := map[string]int{}
	for _, r := range res.rows {
		sys := r[col["system"]].(string)
		rows[sys+" over "+fmt.Sprint(r[col["transport"]])]++
		if rate, ok := r[col["rate"]].(float64); !ok || rate <= 0 {
			t.Errorf("%s %s: no rate: %v", name, sys, r)
		}
		if sys == "PostgreSQL" {
			continue
		}
		for _, c := range []string{"node_cpu", "trips", "checked"} {
			v, ok := r[col[c]].(float64)
			if c == "node_cpu" && (sys == "FORD" || sys == "Smart-DTX" || r[col["transport"]] == "shm") && ok && v == 0 {
				continue
			}
			if !ok || v <= 0 {
				t.Errorf("%s %s: %s %v: %v", name, sys, c, r[col[c]], r)
			}
		}
	}
	systems := []string{"FaRM", "PRISM-TX", "FORD"}
	if name == "txn-peers" {
		systems = append(systems, "Smart-DTX")
	}
	for _, sys := range systems {
		for _, tr := range transports {
			if n := rows[sys+" over "+tr]; n != want {
				t.Errorf("%s: %s over %s has %d rows, want %d", name, sys, tr, n, want)
			}
		}
	}
}

// A txn experiment whose context ends mid-run returns its error and
// leaves no process behind: every `txn serve` node (and PostgreSQL) is
// stopped.
func TestTxnExperimentCanceled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	// Cut while the systems are up, in their first points (5 s each).
	for name, after := range map[string]time.Duration{"txn-ycsbt": 1500 * time.Millisecond, "txn-peers": 3 * time.Second, "txn-smart": 1500 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(t.Context(), after)
		_, _, err := bench.Run(ctx, name, bench.Options{Quick: true, Duration: 5 * time.Second, Command: selfCommand})
		cancel()
		if err == nil {
			t.Errorf("%s: a run cut short at %v succeeded", name, after)
		}
		var left []byte
		for range 50 { // the killed children are being reaped
			if left, err = exec.Command("pgrep", "-P", fmt.Sprint(os.Getpid())).Output(); err != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err == nil {
			t.Errorf("%s: child processes left after cancellation: %s", name, left)
		}
	}
}

// hostileNode listens on loopback and, for every connection, writes
// reply (nothing: it never answers) and never reads; it returns its
// address.
func hostileNode(t *testing.T, reply []byte) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			if reply != nil {
				c.Write(reply)
			}
		}
	}()
	return l.Addr().String()
}

// TestTxnBenchHostileNodes: a "node" that accepts and never answers, and
// one that answers garbage, fail `txn bench` within its --timeout with a
// reason, for every protocol; nothing hangs or panics.
func TestTxnBenchHostileNodes(t *testing.T) {
	for _, proto := range []string{"farm", "prism-tx", "ford"} {
		for name, reply := range map[string][]byte{"silent": nil, "garbage": bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 64)} {
			nodes := strings.Join([]string{hostileNode(t, reply), hostileNode(t, reply), hostileNode(t, reply)}, ",")
			var out, errs bytes.Buffer
			start := time.Now()
			code := run(context.Background(), []string{"txn", "bench", "--protocol", proto, "--nodes", nodes, "--load",
				"--timeout", "500ms", "--duration", "10ms", "--records", "100"}, &out, &errs)
			if took := time.Since(start); code == 0 || strings.Contains(errs.String(), "--") || took > 15*time.Second {
				t.Errorf("%s, %s node: exit %d after %v, %q", proto, name, code, took, errs.String())
			} else {
				t.Logf("%s, %s node: %s", proto, name, strings.TrimSpace(errs.String()))
			}
		}
	}
}

// checkFordCommitTrips finds `txn bench`'s FORD line of commit round
// trips and checks FORD's bound: at most three after execution
// (validate, log, write-and-unlock), at least one on average.
func checkFordCommitTrips(t *testing.T, out string) {
	t.Helper()
	i := strings.Index(out, "commit trips  ")
	if i < 0 {
		t.Fatalf("no commit trips line: %s", out)
	}
	var mean float64
	var most int
	if _, err := fmt.Sscanf(out[i:], "commit trips  %f mean, %d most", &mean, &most); err != nil || mean < 1 || mean > 3 || most > 3 || most < 1 {
		t.Errorf("FORD's commit round trips: mean %v, most %d (%v): %s", mean, most, err, out[i:])
	}
}

// TestTxnRecoverCommand: `txn recover` over three FORD nodes after a
// client that killed itself (--die-at logged) mid-commit: --coordinator
// waits out the lease and rolls its logged transaction forward, frees its
// id; run again with --sweep, it finds nothing left to do.
func TestTxnRecoverCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	nodes := serveTxnNodes(t, protoFord)
	if out, code := txnBench(nodes, "--protocol", protoFord, "--workload", "smallbank", "--records", "100", "--duration", "10ms", "--load", "--buckets", "8192"); code != 0 {
		t.Fatalf("load: %d %s", code, out)
	}
	// A client process that dies in its commit, its log written.
	cmd := selfCommand(t.Context(), "txn", "client", "--protocol", protoFord, "--nodes", nodes, "--buckets", "8192", "--accounts", "100",
		"--first", "10", "--customers", "4", "--die-at", "logged", "--die-in", "2")
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the client did not die by SIGKILL: %v; %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var last txnClientLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || !last.Commit || last.Coord == nil {
		t.Fatalf("the client's last line is no commit with its coordinator: %q, %v", lines[len(lines)-1], err)
	}
	recov := func(args ...string) string {
		var out, errs bytes.Buffer
		if code := run(t.Context(), append([]string{"txn", "recover", "--protocol", protoFord, "--nodes", nodes, "--buckets", "8192"}, args...), &out, &errs); code != 0 {
			t.Fatalf("recover %v: exit %d, %s", args, code, errs.String())
		}
		return out.String()
	}
	id := strconv.Itoa(*last.Coord)
	got := recov("--coordinator", id)
	mustContain(t, got, "coordinator "+id+": its logged transaction rolled forward: ", "coordinator "+id+": id freed")
	// Again: the log still holds the transaction (recovery leaves it), all
	// of it installed; the id is free; no lock is left anywhere.
	mustContain(t, recov("--sweep", "--coordinator", id), "coordinator "+id+": its logged transaction was installed already", "id was not claimed",
		"sweep: 0 expired locks recovered", "0 locks under a live lease")
}
