package peers

import (
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/workload"
)

// TestPGKilledMidRun: PostgreSQL's server is killed (SIGKILL to the
// postmaster and its backends) while 8 clients run SmallBank on it: the
// run ends by its duration with the failures counted or an error — it
// does not wait for a server that is gone — and Stop cleans up after it.
func TestPGKilledMidRun(t *testing.T) {
	needPostgres(t)
	pg := startPostgres(t, PostgresOptions{})
	db, err := OpenPGTxn(t.Context(), pg.ConnString, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := &workload.SmallBank{Accounts: 200, HotAccounts: 10, InitialBalance: 1000}
	b, err := LoadPGSmallBank(t.Context(), db, w)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		pids := pg.Pids()
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	start := time.Now()
	res, err := workload.RunTxnFunc(t.Context(), workload.TxnRun{Threads: 8, Duration: time.Second, Seed: 3}, w, b.Exec)
	took := time.Since(start)
	if took > 10*time.Second {
		t.Fatalf("the run took %v with its server killed after 300 ms", took)
	}
	if err == nil && res.Unknown == 0 && res.Failed == 0 {
		t.Fatalf("no failure reported after the server was killed: %+v", res)
	}
	t.Logf("run ended after %v: err %v", took, err)
}
