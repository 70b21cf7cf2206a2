package main

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/txn/ford"
)

// fordKillsEnv sets how many times TestFordKilledAtEachStep kills a
// client at each commit step, in each of its two runs (default 1; the
// acceptance run takes 20: RDMAKIT_FORD_KILLS=20). commitsEnv sets, as
// for TestTxnKilledClients, how many transactions the survivor commits
// at least.
const fordKillsEnv = "RDMAKIT_FORD_KILLS"

// The FORD kill tests' layout (every node and client) and lease: a
// lease of half the longest FORD allows, so that a kill costs less
// waiting.
var (
	fordKillServe  = []string{"--buckets", "4096"}
	fordKillClient = []string{"--buckets", "4096", "--lease", "500ms"}
)

// TestFordKilledAtEachStep kills (SIGKILL, by the client itself: `txn
// client --die-at`) FORD client processes over tcp at every step of a
// commit — locks taken, read set validated, redo log written, half the
// copies written, half of them unlocked, all unlocked — RDMAKIT_FORD_KILLS
// times per step (default 1), the steps in turn, while a survivor process
// runs SmallBank on other customers. After each kill the victim's keys
// are writable again within probeLimit (its 500 ms lease plus the
// recovery of the client that meets its locks) and the survivor commits
// again; at the end each victim's money replays record by record (its
// transaction under way whole or absent: rolled back before the log,
// forward after), the survivor's adds up, and everything committed is
// serializable.
//
// The run "txn-recover" does the same but repairs each victim with
// `rdmakit txn recover --coordinator ID --sweep` (a process) before the
// probe: the command rolls forward what the log holds, frees the id,
// sweeps the locks of an unlogged transaction, and the probe then finds
// nothing left to recover.
func TestFordKilledAtEachStep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	perStep, minCommits := envCount(t, fordKillsEnv, 1, 1), envCount(t, commitsEnv, 0, 0)
	t.Run("survivor-recovers", func(t *testing.T) { killFord(t, perStep, minCommits, false) })
	t.Run("txn-recover", func(t *testing.T) { killFord(t, perStep, 0, true) })
}

func killFord(t *testing.T, perStep, minCommits int, byCommand bool) {
	kills := perStep * len(ford.Steps)
	b := newKillBed(t, protoFord, kills, fordKillServe, fordKillClient)
	for r := range kills {
		step := ford.Steps[r%len(ford.Steps)]
		v := b.startVictim(r, 0, "--die-at", step.String(), "--die-in", "3")
		select {
		case <-v.done:
		case <-time.After(30 * time.Second):
			v.cmd.Process.Kill()
			t.Fatalf("kill %d: the client did not reach %v in its third commit within 30 s", r, step)
		}
		atKill := b.surv.committed()
		if err := v.cmd.Wait(); !killedBy(err, syscall.SIGKILL) {
			t.Fatalf("kill %d at %v: the client did not die by SIGKILL: %v", r, step, err)
		}
		var repair func(clientLog) func()
		if byCommand {
			repair = func(g clientLog) func() { return b.recoverFord(r, step, g) }
		}
		b.afterKill(r, v, atKill, repair)
	}
	b.finish(minCommits)
}

// killedBy reports whether err is the exit of a process killed by sig.
func killedBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// sweptSome matches a sweep that recovered at least one lock.
var sweptSome = regexp.MustCompile(`sweep: [1-9][0-9]* expired locks recovered`)

// recoverFord runs `txn recover --coordinator ID --sweep` for victim r,
// killed at step, and checks what it says it did: before the log, the
// log holds nothing of the transaction (at most an older, installed one
// whose truncation the kill cut off) and the sweep releases its locks;
// from the log on, the transaction is rolled forward (already installed
// when it was killed after its last unlock). (The sweep may also recover
// a survivor's lock whose lease a stall of the machine let expire: the
// survivor then aborts that transaction.) The function it returns
// checks, after the probe, that the probe had nothing to recover: the
// command repaired all the victim left.
func (b *killBed) recoverFord(r int, step ford.Step, g clientLog) func() {
	t := b.t
	if g.coord < 0 {
		t.Fatalf("kill %d at %v: the client reported no coordinator id", r, step)
	}
	args := append([]string{"txn", "recover", "--coordinator", strconv.Itoa(g.coord), "--sweep"}, b.common...)
	args = slicesWithout(args, "--accounts")
	cmd := selfCommand(t.Context(), args...)
	cmd.Env = append(cmd.Env, "RDMAKIT_TOKEN="+b.tok)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kill %d at %v: txn recover: %v: %s", r, step, err, out)
	}
	got := string(out)
	id := "coordinator " + strconv.Itoa(g.coord) + ": "
	ok := strings.Contains(got, id+"id freed")
	switch step {
	case ford.StepLocked, ford.StepValidated:
		ok = ok && (strings.Contains(got, id+"no transaction in its log") || strings.Contains(got, id+"its logged transaction was installed already")) &&
			sweptSome.MatchString(got)
	case ford.StepCommitted:
		ok = ok && strings.Contains(got, id+"its logged transaction was installed already")
	default:
		ok = ok && strings.Contains(got, id+"its logged transaction rolled forward: ")
	}
	if !ok {
		t.Errorf("kill %d at %v: txn recover said:\n%s", r, step, got)
	}
	db := b.db.(*ford.DB)
	before := db.Stats()
	return func() {
		if after := db.Stats(); after.RolledForward != before.RolledForward || after.RolledBack != before.RolledBack {
			t.Errorf("kill %d at %v: the probe recovered a transaction after txn recover (%+v, then %+v)", r, step, before, after)
		}
	}
}

// slicesWithout returns args without flag and its value.
func slicesWithout(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}
