package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/workload"
)

// killsEnv sets how many clients TestTxnKilledClients kills per protocol
// (default 3; the acceptance run takes 50: RDMAKIT_TXN_KILLS=50, about
// half a minute per protocol on an idle machine).
const killsEnv = "RDMAKIT_TXN_KILLS"

// commitsEnv sets how many transactions TestTxnKilledClients's survivor
// commits at least before the run ends: after the kills it goes on until
// it has (default 0; the acceptance run takes 50,000 — with the loading,
// the victims' and the probes' transactions, the history checked is
// larger still).
const commitsEnv = "RDMAKIT_TXN_KILL_COMMITS"

// The bank of TestTxnKilledClients: the survivors' customers first, then
// victimCustomers of its own for each killed client.
const (
	survivorCustomers = 100
	victimCustomers   = 4
	survivorThreads   = 4
	// probeLimit bounds how long after a kill a write of the keys the
	// victim was committing may take: the protocols' leases (FaRM 500
	// ms, PRISM-TX 800 ms) plus recovery's round trips and the machine's
	// noise.
	probeLimit = 2500 * time.Millisecond
)

// clientProc is a `txn client` process and what it said so far.
type clientProc struct {
	cmd  *exec.Cmd
	done chan struct{} // its output ended

	mu      sync.Mutex
	lines   []txnClientLine
	dones   int           // outcomes: committed, rejected by their own logic, failed
	commits int           // committed
	last    time.Time     // of the last outcome
	gap     time.Duration // the longest time between two outcomes
	// killAfter > 0 arms the kill: at the first commit line after
	// killAfter outcomes, the process is killed (-9) after a random
	// pause of up to killJitter (about a commit's time on a loaded
	// machine, so that kills land before, during and after its phases);
	// killed is closed then.
	killAfter  int
	killJitter time.Duration
	killed     chan struct{}
}

// startClient starts `rdmakit txn client` with args, the token in its
// environment.
func startClient(t *testing.T, token string, killAfter int, args ...string) *clientProc {
	t.Helper()
	c := &clientProc{done: make(chan struct{}), killAfter: killAfter, killJitter: 3 * time.Millisecond, killed: make(chan struct{})}
	c.cmd = selfCommand(context.Background(), append([]string{"txn", "client"}, args...)...)
	c.cmd.Env = append(c.cmd.Env, "RDMAKIT_TOKEN="+token)
	c.cmd.Stderr = os.Stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go c.read(out)
	return c
}

// read takes the client's lines, and kills it when armed.
func (c *clientProc) read(out interface{ Read([]byte) (int, error) }) {
	defer close(c.done)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		var l txnClientLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		c.mu.Lock()
		c.lines = append(c.lines, l)
		if l.Done {
			c.commits++
		}
		if l.Done || l.Rejected || l.Err != "" {
			c.dones++
			now := time.Now()
			if !c.last.IsZero() {
				c.gap = max(c.gap, now.Sub(c.last))
			}
			c.last = now
		}
		kill := c.killAfter > 0 && l.Commit && c.dones >= c.killAfter
		if kill {
			c.killAfter = 0
		}
		c.mu.Unlock()
		if kill {
			spin(time.Duration(rand.Int64N(int64(c.killJitter))))
			c.cmd.Process.Kill()
			close(c.killed)
		}
	}
}

// spin waits d without sleeping (a sleep's granularity is coarser than
// a commit), yielding the processor meanwhile.
func spin(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
		runtime.Gosched()
	}
}

// commitCount is how many transactions the client reported committed.
func (c *clientProc) commitCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commits
}

// committed is how many operations the client finished (committed,
// rejected or failed).
func (c *clientProc) committed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dones
}

// clientLog is what a client's lines say: its committed traces, the sum
// of its committed deltas, and the operation it had under way when its
// output ended (nil for none), with whether it was traced (committed).
type clientLog struct {
	traces       []check.Txn
	delta        int64
	inflight     *workload.SmallBankOp
	inflightDone bool
	// outcomes are its finished operations in the order they finished:
	// committed or rejected by their own logic.
	outcomes []opOutcome
	errs     []string
	tail     string // the last lines, for failure reports
	all      string // every line, for failure reports
}

func (c *clientProc) log() clientLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	var g clientLog
	for _, l := range c.lines[max(0, len(c.lines)-8):] {
		b, _ := json.Marshal(l)
		g.tail += string(b) + " "
	}
	for _, l := range c.lines {
		b, _ := json.Marshal(l)
		g.all += string(b) + "\n"
	}
	cur := map[int]*workload.SmallBankOp{} // by goroutine
	done := map[int]bool{}
	for _, l := range c.lines {
		switch {
		case l.Op != nil:
			cur[l.T], done[l.T] = l.Op, false
		case l.Traced:
			g.traces = append(g.traces, check.Txn{Reads: l.Reads, Writes: l.Writes})
			done[l.T] = true
		case l.Done:
			g.delta += l.Delta
			g.outcomes = append(g.outcomes, opOutcome{*cur[l.T], true})
			cur[l.T] = nil
		case l.Rejected:
			g.outcomes = append(g.outcomes, opOutcome{*cur[l.T], false})
			cur[l.T] = nil
		case l.Err != "":
			g.errs = append(g.errs, l.Err)
			cur[l.T] = nil
		}
	}
	// A killed client runs one goroutine: its operation under way.
	g.inflight, g.inflightDone = cur[0], done[0]
	return g
}

// TestTxnKilledClients kills (-9) SmallBank client processes mid-commit
// over tcp, RDMAKIT_TXN_KILLS times per protocol (default 3), while a
// survivor process runs SmallBank on the other customers: the survivor
// commits again within probeLimit after every kill; the keys a killed client was
// committing are writable again within probeLimit (no lock or prepared
// timestamp outlives the lease); every client's money adds up (a killed
// one's, up to its transaction under way, whole or not at all); and the
// history of every committed transaction — loading, survivor, the killed
// clients' reported ones, the probes — is serializable, a killed
// client's last transaction entering it as the writer of the versions
// found with no reported writer on its keys.
func TestTxnKilledClients(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	kills := 3
	if v := os.Getenv(killsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", killsEnv, v)
		}
		kills = n
	}
	minCommits := 0
	if v := os.Getenv(commitsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a number", commitsEnv, v)
		}
		minCommits = n
	}
	for _, p := range []string{protoFarm, protoPrismTX} {
		t.Run(p, func(t *testing.T) { killClients(t, p, kills, minCommits) })
	}
}

func killClients(t *testing.T, protocol string, kills, minCommits int) {
	ctx := t.Context()
	env := &bench.Env{Options: bench.Options{Command: selfCommand}}
	tok, err := bench.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for range 3 {
		s, err := bench.StartServer(ctx, env, tok, "txn", "serve", "--protocol", protocol, "--listen", "127.0.0.1:0",
			"--slots", "8192", "--memory", "32MiB", "--metrics", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		addrs = append(addrs, s.Addr)
	}
	nodes := strings.Join(addrs, ",")
	accounts := survivorCustomers + kills*victimCustomers
	bank := &workload.SmallBank{Accounts: accounts, HotAccounts: accounts}
	f := txnClientFlags{protocol: protocol, nodes: nodes, device: "tcp://127.0.0.1:0", timeout: 10 * time.Second, backups: 1, valueSize: 64}
	f.token.token = tok
	db, _, err := f.open(ctx, 3*accounts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hist := check.NewHistory()
	if err := bank.Load(ctx, db, workload.TxnLoad{Trace: hist.Add}); err != nil {
		t.Fatal(err)
	}
	common := []string{"--protocol", protocol, "--nodes", nodes, "--accounts", strconv.Itoa(accounts)}
	surv := startClient(t, tok, 0, append(common, "--first", "0", "--customers", strconv.Itoa(survivorCustomers),
		"--threads", strconv.Itoa(survivorThreads))...)
	defer surv.cmd.Process.Kill()
	for deadline := time.Now().Add(30 * time.Second); surv.committed() < 10; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the survivor did not commit 10 transactions within 30 s")
		}
	}

	probes := &tracingDB{DB: db}
	var victims []clientLog
	var maxProbe time.Duration
	blocked := 0 // probes that waited for a lease (the kill left a lock or a prepared timestamp)
	inflightCommitted := 0
	start := time.Now()
	for r := range kills {
		first := survivorCustomers + r*victimCustomers
		v := startClient(t, tok, 3, append(common, "--first", strconv.Itoa(first), "--customers", strconv.Itoa(victimCustomers),
			"--seed", strconv.Itoa(r+1))...)
		select {
		case <-v.killed:
		case <-time.After(30 * time.Second):
			v.cmd.Process.Kill()
			t.Fatalf("kill %d: the client did not commit 3 transactions within 30 s", r)
		}
		atKill := surv.committed()
		// Every line first, then Wait: Wait closes the pipe once the
		// process is gone, and the lines the reader had not taken yet
		// (those the client wrote while the reader waited to kill it)
		// were lost — a transaction committed and not reported, which
		// the replay took for a half-applied one.
		<-v.done
		v.cmd.Wait()
		g := v.log()
		if len(g.errs) > 0 {
			t.Fatalf("kill %d: the client failed before its kill: %v", r, g.errs)
		}
		victims = append(victims, g)
		if g.inflightDone {
			inflightCommitted++
		}
		// The keys it was committing are writable again within the
		// lease (the probe's read-modify-write commits).
		if g.inflight != nil {
			t0 := time.Now()
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := txn.Run(pctx, probes, func(tx txn.Tx) error {
				return touch(tx, *g.inflight)
			})
			cancel()
			took := time.Since(t0)
			maxProbe = max(maxProbe, took)
			if took > 200*time.Millisecond {
				blocked++
			}
			if err != nil || took > probeLimit {
				t.Errorf("kill %d: writing the keys of %+v took %v: %v", r, *g.inflight, took, err)
			}
		}
		// The survivor commits again soon after (a pause of the
		// machine may have held it during a short round).
		for deadline := time.Now().Add(probeLimit); surv.committed() <= atKill; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("kill %d (%v after the start): the survivor committed nothing within %v", r, time.Since(start).Round(time.Millisecond), probeLimit)
				break
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Minute); surv.commitCount() < minCommits; time.Sleep(50 * time.Millisecond) {
		select {
		case <-surv.done:
			t.Fatalf("the survivor ended after %d of the %d transactions it was to commit", surv.commitCount(), minCommits)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the survivor committed %d of %d transactions in 10 minutes", surv.commitCount(), minCommits)
		}
	}
	surv.cmd.Process.Signal(os.Interrupt)
	<-surv.done // every line before Wait closes the pipe
	surv.cmd.Wait()
	sg := surv.log()
	if len(sg.errs) > 0 {
		t.Errorf("the survivor's transactions failed: %d, first %s", len(sg.errs), sg.errs[0])
	}
	t.Logf("%s: %d kills (%d with the transaction under way reported committed before the kill; %d probes waited for a lease, the slowest %v); the survivor committed %d, its longest pause %v",
		protocol, kills, inflightCommitted, blocked, maxProbe, surv.committed(), surv.gap)

	// Money: the survivor's customers exactly. Each victim's, record by
	// record: its committed transactions replayed from the loaded
	// balances, then its transaction under way whole or not at all.
	bal := balances(t, db, accounts)
	var total int64
	for _, b := range bal[:survivorCustomers] {
		total += b[0] + b[1]
	}
	if want := 2*int64(survivorCustomers)*bank.Initial() + sg.delta; total != want {
		t.Errorf("the survivor's customers hold %d, want %d", total, want)
	}
	for r, g := range victims {
		first := survivorCustomers + r*victimCustomers
		if err := checkReplay(bal, first, bank.Initial(), g); err != nil {
			t.Errorf("victim %d (customers %d to %d): %v; its last lines: %s", r, first, first+victimCustomers-1, err, g.tail)
			t.Logf("victim %d's lines:\n%s", r, g.all)
		}
	}

	// Serializability of everything committed.
	txns := append([]check.Txn(nil), hist.Txns()...)
	txns = append(txns, sg.traces...)
	for _, g := range victims {
		txns = append(txns, g.traces...)
	}
	txns = append(txns, probes.traces...)
	orphans, err := inflightWriters(txns, victims)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Serializable(append(txns, orphans...)); err != nil {
		t.Fatalf("%d transactions: %v", len(txns), err)
	}
	t.Logf("%s: %d committed transactions serializable, %d of them killed clients' transactions found committed after the kill", protocol, len(txns)+len(orphans), len(orphans))
}

// tracingDB is a txn.DB that keeps its committed transactions' traces.
type tracingDB struct {
	txn.DB
	mu     sync.Mutex
	traces []check.Txn
}

func (d *tracingDB) Begin(ctx context.Context) (txn.Tx, error) {
	tx, err := d.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &tracingTx{Tx: tx, db: d}, nil
}

type tracingTx struct {
	txn.Tx
	db *tracingDB
}

func (x *tracingTx) Commit() error {
	if err := x.Tx.Commit(); err != nil {
		return err
	}
	r, w := x.Tx.(txn.Traced).Trace()
	x.db.mu.Lock()
	defer x.db.mu.Unlock()
	x.db.traces = append(x.db.traces, check.Txn{Reads: append([]txn.Access(nil), r...), Writes: append([]txn.Access(nil), w...)})
	return nil
}

// touch reads and writes back, unchanged, every balance op uses.
func touch(tx txn.Tx, op workload.SmallBankOp) error {
	keys := [][]byte{workload.SavingsKey(op.Cust1), workload.CheckingKey(op.Cust1)}
	if op.Kind == workload.Amalgamate || op.Kind == workload.SendPayment {
		keys = append(keys, workload.SavingsKey(op.Cust2), workload.CheckingKey(op.Cust2))
	}
	for _, k := range keys {
		v, err := tx.Get(k)
		if err != nil {
			return err
		}
		if err := tx.Put(k, v); err != nil {
			return err
		}
	}
	return nil
}

// balances reads every customer's savings and checking.
func balances(t *testing.T, db txn.DB, accounts int) [][2]int64 {
	t.Helper()
	out := make([][2]int64, accounts)
	for id := range accounts {
		err := txn.Run(t.Context(), db, func(tx txn.Tx) error {
			s, err := tx.Get(workload.SavingsKey(uint64(id)))
			if err != nil {
				return err
			}
			c, err := tx.Get(workload.CheckingKey(uint64(id)))
			if err != nil {
				return err
			}
			out[id] = [2]int64{int64(binary.BigEndian.Uint64(s)), int64(binary.BigEndian.Uint64(c))}
			return nil
		})
		if err != nil {
			t.Fatalf("customer %d: %v", id, err)
		}
	}
	return out
}

// opOutcome is a finished operation of a client: committed, or rejected
// by its own logic.
type opOutcome struct {
	op        workload.SmallBankOp
	committed bool
}

// applyOp applies op to balances (savings, checking by customer) as
// SmallBank's transaction does, and says whether it commits (false: its
// own logic rejects it, nothing changes).
func applyOp(b map[uint64]*[2]int64, op workload.SmallBankOp) bool {
	c1, c2 := b[op.Cust1], b[op.Cust2]
	switch op.Kind {
	case workload.Amalgamate:
		c2[1] += c1[0] + c1[1]
		c1[0], c1[1] = 0, 0
	case workload.DepositChecking:
		c1[1] += op.Amount
	case workload.SendPayment:
		if c1[1] < op.Amount {
			return false
		}
		c1[1] -= op.Amount
		c2[1] += op.Amount
	case workload.TransactSavings:
		c1[0] += op.Amount
	case workload.WriteCheck:
		take := op.Amount
		if c1[0]+c1[1] < op.Amount {
			take++
		}
		c1[1] -= take
	}
	return true
}

// checkReplay replays a killed client's finished operations on its
// customers (from first on, each loaded with initial in savings and in
// checking) — each must end as the client said (committed or rejected)
// — and compares every balance read back with the result, or with the
// result of its operation under way too: that one is whole or absent.
func checkReplay(bal [][2]int64, first int, initial int64, g clientLog) error {
	state := func() map[uint64]*[2]int64 {
		m := map[uint64]*[2]int64{}
		for id := first; id < first+victimCustomers; id++ {
			m[uint64(id)] = &[2]int64{initial, initial}
		}
		m[0] = &[2]int64{} // Cust2 of the one-customer operations
		return m
	}
	s := state()
	for i, o := range g.outcomes {
		if applyOp(s, o.op) != o.committed {
			return fmt.Errorf("operation %d (%+v) committed=%v, but the balances its predecessors left say otherwise", i, o.op, o.committed)
		}
	}
	same := func(m map[uint64]*[2]int64) bool {
		for id := first; id < first+victimCustomers; id++ {
			if *m[uint64(id)] != bal[id] {
				return false
			}
		}
		return true
	}
	if same(s) {
		return nil
	}
	var want []string
	for id := first; id < first+victimCustomers; id++ {
		want = append(want, fmt.Sprint(*s[uint64(id)]))
	}
	if g.inflight != nil {
		applyOp(s, *g.inflight)
		if same(s) {
			return nil
		}
	}
	return fmt.Errorf("balances (savings, checking) %v; its finished transactions leave %v; under way: %+v (half applied?)",
		bal[first:first+victimCustomers], want, g.inflight)
}

// inflightWriters returns, for each victim whose keys hold versions read
// by a committed transaction but written by none reported, a transaction
// that writes them: its transaction under way, which committed (or was
// rolled forward) at or after the kill. A version without writer on a
// key of no victim with a transaction under way, or two on one key, is
// an error.
func inflightWriters(txns []check.Txn, victims []clientLog) ([]check.Txn, error) {
	type kv struct {
		key string
		ver uint64
	}
	written := map[kv]bool{}
	for _, tx := range txns {
		for _, w := range tx.Writes {
			written[kv{w.Key, w.Version}] = true
		}
	}
	orphans := map[int]map[string]uint64{}
	for _, tx := range txns {
		for _, r := range tx.Reads {
			if r.Version == 0 || written[kv{r.Key, r.Version}] {
				continue
			}
			_, idText, _ := strings.Cut(r.Key, "/")
			id, err := strconv.Atoi(idText)
			v := (id - survivorCustomers) / victimCustomers
			if err != nil || id < survivorCustomers || v >= len(victims) || victims[v].inflight == nil {
				return nil, fmt.Errorf("version %d of %q was read, and no transaction that could have written it is known", r.Version, r.Key)
			}
			if orphans[v] == nil {
				orphans[v] = map[string]uint64{}
			}
			if old, ok := orphans[v][r.Key]; ok && old != r.Version {
				return nil, fmt.Errorf("versions %d and %d of %q have no reported writer: victim %d had one transaction under way", old, r.Version, r.Key, v)
			}
			orphans[v][r.Key] = r.Version
		}
	}
	var out []check.Txn
	for _, ws := range orphans {
		var tx check.Txn
		for k, ver := range ws {
			tx.Writes = append(tx.Writes, txn.Access{Key: k, Version: ver})
		}
		out = append(out, tx)
	}
	return out, nil
}

// The kill test's own checks can fail: a half-applied payment, a
// rejection its predecessors do not explain, a version with no writer
// on a survivor's key or two on one key of a killed client.
func TestTxnKillChecks(t *testing.T) {
	const first, init = survivorCustomers, 100
	c0, c1 := uint64(first), uint64(first+1)
	pay := workload.SmallBankOp{Kind: workload.SendPayment, Cust1: c0, Cust2: c1, Amount: 30}
	g := clientLog{outcomes: []opOutcome{{workload.SmallBankOp{Kind: workload.DepositChecking, Cust1: c0, Amount: 5}, true}}, inflight: &pay}
	bal := make([][2]int64, first+victimCustomers)
	for i := range bal {
		bal[i] = [2]int64{init, init}
	}
	bal[c0][1] = init + 5
	if err := checkReplay(bal, first, init, g); err != nil {
		t.Errorf("the payment absent: %v", err)
	}
	bal[c0][1], bal[c1][1] = init+5-30, init+30
	if err := checkReplay(bal, first, init, g); err != nil {
		t.Errorf("the payment whole: %v", err)
	}
	bal[c1][1] = init
	if err := checkReplay(bal, first, init, g); err == nil {
		t.Error("a half-applied payment passed")
	}
	g.outcomes = append(g.outcomes, opOutcome{workload.SmallBankOp{Kind: workload.SendPayment, Cust1: c1, Cust2: c0, Amount: 50}, false})
	if err := checkReplay(bal, first, init, g); err == nil || !strings.Contains(err.Error(), "committed=false") {
		t.Errorf("a payment rejected with the funds there: %v", err)
	}

	victims := []clientLog{{inflight: &pay}}
	read := func(key string, v uint64) check.Txn {
		return check.Txn{Reads: []txn.Access{{Key: key, Version: v}}}
	}
	if w, err := inflightWriters([]check.Txn{read("sb.chk/100", 7), read("sb.sav/100", 3)}, victims); err != nil || len(w) != 1 || len(w[0].Writes) != 2 {
		t.Errorf("a victim's two orphans: %v, %v", w, err)
	}
	if _, err := inflightWriters([]check.Txn{read("sb.chk/5", 7)}, victims); err == nil {
		t.Error("an orphan on a survivor's key passed")
	}
	if _, err := inflightWriters([]check.Txn{read("sb.chk/100", 7), read("sb.chk/100", 8)}, victims); err == nil {
		t.Error("two orphan versions of one key passed")
	}
}
