package main

import (
	"os/exec"
	"testing"
)

// btreeRows are btree-ycsb's rdmakit rows.
var btreeRows = []string{"Sherman", "Sherman+", "Smart-BT", "throttling", "backoff", "coroutine-throttle", "spec-lookup", "RPC B-tree"}

// TestBTreeYCSBExperiment runs `rdmakit bench run btree-ycsb --quick`
// through the command, so that Sherman's memory node and the RPC B-tree
// start as `rdmakit btree serve` processes: every system (Sherman,
// Sherman+, Smart-BT, each technique alone, the RPC B-tree, Redis) has a
// row with a rate at every workload and task count; every Sherman row's
// Get is one round trip (a warm cache) and moves at least a leaf entry,
// Sherman's a leaf, speculative lookup's less than Sherman's; the RPC
// tree's Get is one call; Sherman's 100-key scan READs its run of leaves
// in one or two round trips.
func TestBTreeYCSBExperiment(t *testing.T) {
	res := runExperiment(t, "btree-ycsb", "--quick", "--duration", "40ms")
	col := res.col
	want := map[string]bool{}
	for _, r := range btreeRows {
		want[r] = true
	}
	if _, err := exec.LookPath("redis-server"); err == nil {
		want["Redis sorted set"] = true
	}
	seen := map[string]int{}
	getBytes := map[string]float64{}
	for _, r := range res.rows {
		sys, w := r[col["system"]].(string), r[col["workload"]].(string)
		seen[sys]++
		if rate, ok := r[col["rate"]].(float64); !ok || rate <= 0 {
			t.Errorf("%s %s: no rate: %v", sys, w, r)
		}
		trips, _ := r[col["trips"]].(float64)
		bytes, _ := r[col["bytes"]].(float64)
		switch {
		case w == "C" && sys == "RPC B-tree" && trips != 1:
			t.Errorf("RPC B-tree YCSB-C: %.2f round trips per Get", trips)
		case w == "C" && sys != "RPC B-tree" && sys != "Redis sorted set":
			if trips < 1 || trips > 1.2 || bytes < 16 {
				t.Errorf("%s YCSB-C: %.2f round trips and %.0f bytes per Get", sys, trips, bytes)
			}
			getBytes[sys] = max(getBytes[sys], bytes)
		case w == "S100" && sys == "Sherman" && (trips < 1 || trips > 2.5 || bytes < 100*16):
			// a run of leaves in one list (a warm scan: one or two), at
			// least the 100 keys' and values' bytes
			t.Errorf("Sherman S100: %.2f round trips and %.0f bytes per 100-key scan", trips, bytes)
		}
	}
	if getBytes["Sherman"] < 64 || getBytes["spec-lookup"] >= getBytes["Sherman"] || getBytes["Smart-BT"] >= getBytes["Sherman"] {
		t.Errorf("bytes per Get (the most of 8 and 32 tasks): %v", getBytes)
	}
	for sys := range want {
		if seen[sys] != 10 {
			t.Errorf("%s: %d rows, want 10 (5 workloads × 2 task counts)", sys, seen[sys])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("systems %v, want %v", seen, want)
	}
}

// TestBTreeYCSBOnly: --only keeps the rows named and starts nothing
// else.
func TestBTreeYCSBOnly(t *testing.T) {
	res := runExperiment(t, "btree-ycsb", "--quick", "--duration", "20ms", "--only", "Smart-BT,rpc b-tree")
	seen := map[string]int{}
	for _, r := range res.rows {
		seen[r[res.col["system"]].(string)]++
	}
	if len(seen) != 2 || seen["Smart-BT"] != 10 || seen["RPC B-tree"] != 10 {
		t.Fatalf("rows by system: %v", seen)
	}
}
