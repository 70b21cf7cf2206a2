package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestTransportLatencyExperiment runs the two-process experiment in its
// quick form: the node is this test binary re-run as `rdmakit node`.
// Peers that are not installed leave their rows out; the rdmakit rows are
// always there.
func TestTransportLatencyExperiment(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := execute(t, "bench", "run", "transport-latency", "--quick", "--duration", "20ms", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	mustContain(t, out, "| rdmakit tcp | read 8 B | rtt | 1 |", "| rdmakit tcp | send 8 B | rtt | 1 |",
		"| rdmakit tcp | read 8 B | rate | 64 |", "- **transport:** tcp")
	b, err := os.ReadFile(filepath.Join(dir, "transport-latency.json"))
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
	col := map[string]int{}
	for i, c := range res.Columns {
		col[c.Name] = i
	}
	rates, rtts := 0, 0
	for _, r := range res.Rows {
		if r[col["system"]] != "rdmakit tcp" {
			continue
		}
		switch r[col["test"]] {
		case "rtt":
			if v, ok := r[col["rtt_p50"]].(float64); !ok || v <= 0 {
				t.Errorf("round trip row without a positive p50: %v", r)
			}
			rtts++
		case "rate":
			if v, ok := r[col["rate"]].(float64); !ok || v <= 0 {
				t.Errorf("rate row without a positive rate: %v", r)
			}
			rates++
		}
	}
	if rtts != 4 || rates != 4 {
		t.Errorf("%d round-trip and %d rate rows, want 4 and 4", rtts, rates)
	}
}
