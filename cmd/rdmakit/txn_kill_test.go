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

	"github.com/spf13/cobra"

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
	// coord is the coordinator id of its last commit line (FORD), -1
	// for none.
	coord int
	// outcomes are its finished operations in the order they finished:
	// committed or rejected by their own logic.
	outcomes []opOutcome
	errs     []string
	tail     string          // the last lines, for failure reports
	lines    []txnClientLine // every line, for failure reports (all)
}

// all renders every line of the client, one per line: a replay
// failure's report.
func (g clientLog) all() string {
	var b strings.Builder
	for _, l := range g.lines {
		j, _ := json.Marshal(l)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func (c *clientProc) log() clientLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := clientLog{coord: -1}
	for _, l := range c.lines[max(0, len(c.lines)-8):] {
		b, _ := json.Marshal(l)
		g.tail += string(b) + " "
	}
	g.lines = c.lines
	cur := map[int]*workload.SmallBankOp{} // by goroutine
	done := map[int]bool{}
	for _, l := range c.lines {
		switch {
		case l.Commit:
			if l.Coord != nil {
				g.coord = *l.Coord
			}
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
	kills, minCommits := envCount(t, killsEnv, 3, 1), envCount(t, commitsEnv, 0, 0)
	for _, p := range []string{protoFarm, protoPrismTX} {
		t.Run(p, func(t *testing.T) { killClients(t, p, kills, minCommits) })
	}
}

// envCount is the number in the environment variable name, def when it
// is not set; below least, or not a number, fails the test.
func envCount(t *testing.T, name string, def, least int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		t.Fatalf("%s=%q: want a number from %d on", name, v, least)
	}
	return n
}

func killClients(t *testing.T, protocol string, kills, minCommits int) {
	b := newKillBed(t, protocol, kills, []string{"--slots", "8192", "--memory", "32MiB"}, nil)
	for r := range kills {
		v := b.startVictim(r, 3)
		select {
		case <-v.killed:
		case <-time.After(30 * time.Second):
			v.cmd.Process.Kill()
			t.Fatalf("kill %d: the client did not commit 3 transactions within 30 s", r)
		}
		atKill := b.surv.committed()
		// Every line first, then Wait: Wait closes the pipe once the
		// process is gone, and the lines the reader had not taken yet
		// (those the client wrote while the reader waited to kill it)
		// were lost — a transaction committed and not reported, which
		// the replay took for a half-applied one.
		<-v.done
		v.cmd.Wait()
		b.afterKill(r, v, atKill, nil)
	}
	b.finish(minCommits)
}

// killBed is one run of a kill test over tcp: three `txn serve` node
// processes, a bank loaded for a survivor and the victims, the survivor
// (a `txn client` process running SmallBank on its customers), a client
// in the test process that probes the victims' keys after each kill and
// reads the balances at the end, and what the victims said.
type killBed struct {
	t        *testing.T
	protocol string
	tok      string
	common   []string // every client process's flags
	accounts int
	bank     *workload.SmallBank
	db       txn.DB
	hist     *check.History
	surv     *clientProc
	probes   *tracingDB
	victims  []clientLog
	start    time.Time
	// maxProbe is the slowest probe; blocked counts the probes that
	// waited for a lease (the kill left a lock or a prepared
	// timestamp); inflightCommitted the victims whose transaction under
	// way was reported committed before the kill.
	maxProbe                   time.Duration
	blocked, inflightCommitted int
}

// newKillBed starts the nodes (serve: protocol-specific `txn serve`
// flags), loads a bank for victims victims and starts the survivor,
// returning once it has committed 10 transactions. client are
// protocol-specific flags of every client, processes and the test's own.
func newKillBed(t *testing.T, protocol string, victims int, serve, client []string) *killBed {
	ctx := t.Context()
	env := &bench.Env{Options: bench.Options{Command: selfCommand}}
	tok, err := bench.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for range 3 {
		s, err := bench.StartServer(ctx, env, tok, append([]string{"txn", "serve", "--protocol", protocol, "--listen", "127.0.0.1:0", "--metrics", ""}, serve...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		addrs = append(addrs, s.Addr)
	}
	nodes := strings.Join(addrs, ",")
	accounts := survivorCustomers + victims*victimCustomers
	b := &killBed{t: t, protocol: protocol, tok: tok, accounts: accounts, bank: &workload.SmallBank{Accounts: accounts, HotAccounts: accounts},
		hist: check.NewHistory(), start: time.Now()}
	// The test's own client, with the flags' defaults as the processes.
	var f txnClientFlags
	cmd := &cobra.Command{}
	f.add(cmd)
	if err := cmd.Flags().Parse(append([]string{"--protocol", protocol, "--nodes", nodes}, client...)); err != nil {
		t.Fatal(err)
	}
	f.token.token = tok
	if b.db, _, err = f.open(ctx, 3*accounts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.db.Close() })
	b.probes = &tracingDB{DB: b.db}
	if err := b.bank.Load(ctx, b.db, workload.TxnLoad{Trace: b.hist.Add}); err != nil {
		t.Fatal(err)
	}
	b.common = append([]string{"--protocol", protocol, "--nodes", nodes, "--accounts", strconv.Itoa(accounts)}, client...)
	b.surv = startClient(t, tok, 0, append(b.common, "--first", "0", "--customers", strconv.Itoa(survivorCustomers),
		"--threads", strconv.Itoa(survivorThreads))...)
	t.Cleanup(func() { b.surv.cmd.Process.Kill() })
	for deadline := time.Now().Add(30 * time.Second); b.surv.committed() < 10; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the survivor did not commit 10 transactions within 30 s")
		}
	}
	return b
}

// startVictim starts victim r's client process on its own customers,
// killed by the test after killAfter outcomes (0: not by the test),
// with extra flags.
func (b *killBed) startVictim(r, killAfter int, extra ...string) *clientProc {
	first := survivorCustomers + r*victimCustomers
	args := append(append([]string(nil), b.common...), "--first", strconv.Itoa(first), "--customers", strconv.Itoa(victimCustomers),
		"--seed", strconv.Itoa(r+1))
	return startClient(b.t, b.tok, killAfter, append(args, extra...)...)
}

// afterKill takes victim r's report once its process is gone and its
// output read, then runs repair (when not nil: what stands in for the
// recovery the probe would do; the function it returns, when not nil,
// runs after the probe), probes the keys it was committing — writable
// again within probeLimit — and waits for the survivor to commit again
// past atKill, its count at the kill.
func (b *killBed) afterKill(r int, v *clientProc, atKill int, repair func(g clientLog) func()) {
	t := b.t
	g := v.log()
	if len(g.errs) > 0 {
		t.Fatalf("kill %d: the client failed before its kill: %v", r, g.errs)
	}
	b.victims = append(b.victims, g)
	if g.inflightDone {
		b.inflightCommitted++
	}
	var after func()
	if repair != nil {
		after = repair(g)
	}
	// The keys it was committing are writable again within the lease
	// (the probe's read-modify-write commits).
	if g.inflight != nil {
		t0 := time.Now()
		pctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := txn.Run(pctx, b.probes, func(tx txn.Tx) error {
			return touch(tx, *g.inflight)
		})
		cancel()
		took := time.Since(t0)
		b.maxProbe = max(b.maxProbe, took)
		if took > 200*time.Millisecond {
			b.blocked++
		}
		if err != nil || took > probeLimit {
			t.Errorf("kill %d: writing the keys of %+v took %v: %v", r, *g.inflight, took, err)
		}
	}
	if after != nil {
		after()
	}
	// The survivor commits again soon after (a pause of the machine may
	// have held it during a short round).
	for deadline := time.Now().Add(probeLimit); b.surv.committed() <= atKill; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("kill %d (%v after the start): the survivor committed nothing within %v", r, time.Since(b.start).Round(time.Millisecond), probeLimit)
			break
		}
	}
}

// finish lets the survivor commit minCommits transactions at least,
// stops it and checks the money, every victim's replay and the
// serializability of everything committed.
func (b *killBed) finish(minCommits int) {
	t, surv := b.t, b.surv
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
		b.protocol, len(b.victims), b.inflightCommitted, b.blocked, b.maxProbe, surv.committed(), surv.gap)

	// Money: the survivor's customers exactly. Each victim's, record by
	// record: its committed transactions replayed from the loaded
	// balances, then its transaction under way whole or not at all.
	bal := balances(t, b.db, b.accounts)
	var total int64
	for _, c := range bal[:survivorCustomers] {
		total += c[0] + c[1]
	}
	if want := 2*int64(survivorCustomers)*b.bank.Initial() + sg.delta; total != want {
		t.Errorf("the survivor's customers hold %d, want %d", total, want)
	}
	for r, g := range b.victims {
		first := survivorCustomers + r*victimCustomers
		if err := checkReplay(bal, first, b.bank.Initial(), g); err != nil {
			t.Errorf("victim %d (customers %d to %d): %v; its last lines: %s", r, first, first+victimCustomers-1, err, g.tail)
			t.Logf("victim %d's lines:\n%s", r, g.all())
		}
	}

	// Serializability of everything committed.
	txns := append([]check.Txn(nil), b.hist.Txns()...)
	txns = append(txns, sg.traces...)
	for _, g := range b.victims {
		txns = append(txns, g.traces...)
	}
	txns = append(txns, b.probes.traces...)
	orphans, err := inflightWriters(txns, b.victims)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Serializable(append(txns, orphans...)); err != nil {
		t.Fatalf("%d transactions: %v", len(txns), err)
	}
	t.Logf("%s: %d committed transactions serializable, %d of them killed clients' transactions found committed after the kill", b.protocol, len(txns)+len(orphans), len(orphans))
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
