package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// experimentResult is an experiment's JSON output: its rows, and its
// columns' indexes by name.
type experimentResult struct {
	col  map[string]int
	rows [][]any
	out  string // what the command printed
}

// runExperiment runs `rdmakit bench run NAME args…` into a temporary
// directory and reads NAME.json back.
func runExperiment(t *testing.T, name string, args ...string) experimentResult {
	t.Helper()
	dir := t.TempDir()
	out, errs, code := execute(t, append([]string{"bench", "run", name, "--out", dir}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Columns []struct{ Name string }
		Rows    [][]any
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	r := experimentResult{col: map[string]int{}, rows: res.Rows, out: out}
	for i, c := range res.Columns {
		r.col[c.Name] = i
	}
	return r
}

// TestRSYCSBExperiment runs `rdmakit bench run rs-ycsb --quick` through
// the command, so that PRISM-RS and ABD over RPC start their replicas as
// `rdmakit rs replica` processes: both must give a row at every point,
// with a rate, replica CPU and the round trips their clients count (3
// for a read that needs no write-back, more for writes).
func TestRSYCSBExperiment(t *testing.T) {
	res := runExperiment(t, "rs-ycsb", "--quick", "--duration", "50ms")
	col := res.col
	rows := map[string]int{}
	for _, r := range res.rows {
		sys := r[col["system"]].(string)
		rows[sys]++
		if sys == "etcd" {
			continue
		}
		if rate, ok := r[col["rate"]].(float64); !ok || rate <= 0 {
			t.Errorf("%s: no rate: %v", sys, r)
		}
		if _, ok := r[col["replica_cpu"]].(float64); !ok {
			t.Errorf("%s: no replica CPU: %v", sys, r)
		}
		trips, ok := r[col["trips"]].(float64)
		if !ok || trips < 1 {
			t.Errorf("%s: round trips %v: %v", sys, r[col["trips"]], r)
		}
		if r[col["workload"]] == "C" && trips > 3.5 {
			t.Errorf("%s: %v round trips per read-only operation (3 replicas answer one phase each)", sys, trips)
		}
	}
	for _, sys := range []string{"PRISM-RS", "ABD over RPC"} {
		if rows[sys] != 18 {
			t.Errorf("%s: %d rows, want 18 (3 workloads × 2 key distributions × 3 client counts)", sys, rows[sys])
		}
	}
}
