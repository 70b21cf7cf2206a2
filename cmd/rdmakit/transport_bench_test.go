package main

import (
	"testing"
)

// TestTransportLatencyExperiment runs the two-process experiment in its
// quick form: the nodes (tcp and shm) are this test binary re-run as
// `rdmakit node`. Peers that are not installed leave their rows out; the
// rdmakit rows and the memcpy probe are always there.
func TestTransportLatencyExperiment(t *testing.T) {
	res := runExperiment(t, "transport-latency", "--quick", "--duration", "20ms")
	out, col := res.out, res.col
	mustContain(t, out, "| rdmakit tcp | read 8 B | rtt | 1 |", "| rdmakit tcp | send 8 B | rtt | 1 |",
		"| rdmakit tcp | read 8 B | rate | 64 |", "- **transport:** tcp, shm",
		"| rdmakit shm | read 8 B | lat | 1 |", "| rdmakit shm | cas 8 B | lat | 1 |",
		"| rdmakit shm | send 8 B | one-way | 1 |", "| rdmakit shm | write 1 MiB | bw |", "| go copy() | memcpy 1 MiB | bw | 1 |")
	positive := func(r []any, name string) bool {
		v, ok := r[col[name]].(float64)
		return ok && v > 0
	}
	rates, rtts, shmLat, shmBW := 0, 0, 0, 0
	ucx := map[string]bool{}
	for _, r := range res.rows {
		switch r[col["system"]] {
		case "ucx_perftest UCX_TLS=posix":
			if !positive(r, "avg") || !positive(r, "p50") {
				t.Errorf("UCX row without a positive avg and p50: %v", r)
			}
			ucx[r[col["op"]].(string)] = true
		case "rdmakit shm":
			switch r[col["test"]] {
			case "lat", "one-way":
				if !positive(r, "avg") || !positive(r, "p50") || !positive(r, "p99") {
					t.Errorf("shm latency row without a positive avg, p50 and p99: %v", r)
				}
				shmLat++
				peer := map[string]string{"read 8 B": "ucp_get 8 B", "cas 8 B": "ucp_cswap 8 B", "send 8 B": "ucp_am_lat 8 B"}[r[col["op"]].(string)]
				if peer != "" && ucx[peer] && (!positive(r, "ratio") || r[col["ratio_of"]] == nil) {
					t.Errorf("shm row without its ratio to %s: %v", peer, r)
				}
			case "bw":
				if !positive(r, "bw") || !positive(r, "ratio") || r[col["ratio_of"]] != "bw / memcpy bw" {
					t.Errorf("shm bandwidth row without a positive bw and ratio to memcpy: %v", r)
				}
				shmBW++
			}
		case "go copy()":
			if !positive(r, "bw") {
				t.Errorf("memcpy row without a positive bw: %v", r)
			}
		case "rdmakit tcp":
			switch r[col["test"]] {
			case "rtt":
				if !positive(r, "rtt_p50") {
					t.Errorf("round trip row without a positive p50: %v", r)
				}
				rtts++
			case "rate":
				if !positive(r, "rate") {
					t.Errorf("rate row without a positive rate: %v", r)
				}
				rates++
			}
		}
	}
	if rtts != 4 || rates != 4 {
		t.Errorf("%d round-trip and %d rate rows, want 4 and 4", rtts, rates)
	}
	if shmLat != 4 || shmBW != 1 {
		t.Errorf("%d shm latency and %d shm bandwidth rows, want 4 and 1", shmLat, shmBW)
	}
}
