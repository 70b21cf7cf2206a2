package main

import (
	"os/exec"
	"testing"
)

// TestBTreeYCSBExperiment runs `rdmakit bench run btree-ycsb --quick`
// through the command, so that Sherman's memory node and the RPC B-tree
// start as `rdmakit btree serve` processes: every system has a row with
// a rate at every workload and task count; Sherman's Get is one round
// trip (a warm cache) and moves at least a leaf, the RPC tree's is one
// call.
func TestBTreeYCSBExperiment(t *testing.T) {
	res := runExperiment(t, "btree-ycsb", "--quick", "--duration", "40ms")
	col := res.col
	want := map[string]bool{"Sherman": true, "RPC B-tree": true}
	if _, err := exec.LookPath("redis-server"); err == nil {
		want["Redis sorted set"] = true
	}
	seen := map[string]int{}
	for _, r := range res.rows {
		sys, w := r[col["system"]].(string), r[col["workload"]].(string)
		seen[sys]++
		if rate, ok := r[col["rate"]].(float64); !ok || rate <= 0 {
			t.Errorf("%s YCSB-%s: no rate: %v", sys, w, r)
		}
		trips, _ := r[col["trips"]].(float64)
		switch {
		case w == "C" && sys == "Sherman":
			if bytes, _ := r[col["bytes"]].(float64); trips < 1 || trips > 1.2 || bytes < 64 {
				t.Errorf("Sherman YCSB-C: %.2f round trips and %.0f bytes per Get", trips, bytes)
			}
		case w == "C" && sys == "RPC B-tree" && trips != 1:
			t.Errorf("RPC B-tree YCSB-C: %.2f round trips per Get", trips)
		}
	}
	for sys := range want {
		if seen[sys] != 8 {
			t.Errorf("%s: %d rows, want 8 (4 workloads × 2 task counts)", sys, seen[sys])
		}
	}
}
