package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

var registrySeq atomic.Int64

func TestRegistry(t *testing.T) {
	name := fmt.Sprintf("test-registry-%d", registrySeq.Add(1)) // unique under -count=N
	e := Experiment{Name: name, Description: "d", Run: func(context.Context, *Env) (*Result, error) { return &Result{}, nil }}
	Register(e)
	got, ok := Lookup(name)
	if !ok || got.Description != "d" {
		t.Fatalf("Lookup = %+v, %v", got, ok)
	}
	if _, ok := Lookup("no-such"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
	names := []string{}
	for _, e := range List() {
		names = append(names, e.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "perf") || !strings.Contains(strings.Join(names, ","), "test-registry") {
		t.Errorf("List = %v", names)
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("List not sorted: %v", names)
		}
	}
	for _, bad := range []Experiment{e, {Name: "", Run: e.Run}, {Name: "x y", Run: e.Run}, {Name: "norun"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", bad.Name)
				}
			}()
			Register(bad)
		}()
	}
	if _, _, err := Run(context.Background(), "no-such", Options{}); err == nil {
		t.Error("Run of an unknown experiment succeeded")
	}
}

func sampleResult() *Result {
	r := &Result{
		Name:    "sample",
		Title:   "Sample | result",
		Columns: []Column{{Name: "op"}, {Name: "test"}, {Name: "bytes", Unit: "B"}, {Name: "p50", Unit: "µs"}, {Name: "bandwidth", Unit: "GB/s"}},
		Notes:   []string{"a note"},
		Plots: []Plot{
			{Title: "lat", X: "bytes", Y: "p50", Series: []string{"op"}, Where: map[string]string{"test": "lat"}, LogX: true, LogY: true},
			{Title: "bw", X: "bytes", Y: "bandwidth", Series: []string{"op"}, Where: map[string]string{"test": "bw"}, LogX: true},
		},
	}
	for _, n := range []int{8, 4096, 1 << 20} {
		r.AddRow("read", "lat", n, 0.1*float64(n)/8+0.05, float64(n)/1e4)
		r.AddRow("write", "bw", n, nil, float64(n)/1e3)
	}
	r.AddRow("cas", "lat", 8, 0.0812, 0.09)
	r.Meta = collectMeta(&Options{Poll: verbs.PollBusy, Transport: "loop://x", Quick: true})
	return r
}

func TestWriters(t *testing.T) {
	r := sampleResult()
	dir := filepath.Join(t.TempDir(), "out")
	paths, err := WriteFiles(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Fatalf("paths = %v", paths)
	}
	for i, ext := range []string{".json", ".md", ".png"} {
		if paths[i] != filepath.Join(dir, "sample"+ext) {
			t.Errorf("path %d = %s", i, paths[i])
		}
	}

	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(data) {
		t.Fatal("invalid JSON")
	}
	back, err := ReadJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if back.Name != "sample" || len(back.Rows) != 7 || back.Rows[1][3] != nil || back.Rows[0][2] != float64(8) ||
		back.Meta.Transport != "loop" || back.Meta.Poll != "busy" || !back.Meta.Quick || back.Meta.CPU == "" || back.Meta.GOMAXPROCS < 1 {
		t.Errorf("round trip: %+v", back)
	}

	md, err := os.ReadFile(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Sample | result", "- **polling:** busy", "- **go:** go", "- **transport:** loop",
		"| op | test | bytes [B] | p50 [µs] | bandwidth [GB/s] |", "| --- | --- | ---: | ---: | ---: |",
		"| write | bw | 4096 | — | 4.096 |", "| cas | lat | 8 | 0.08120 | 0.09000 |", "- a note"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}

	f, err := os.Open(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Errorf("image is %v", b)
	}
}

func TestPlotErrors(t *testing.T) {
	r := sampleResult()
	r.Plots = []Plot{{Title: "bad", X: "nope", Y: "p50"}}
	if err := WritePNG(&bytes.Buffer{}, r); err == nil {
		t.Error("unknown column accepted")
	}
	r.Plots = nil // a placeholder chart
	if err := WritePNG(&bytes.Buffer{}, r); err != nil {
		t.Error(err)
	}
	r.Plots = []Plot{{Title: "bars", Y: "p50", Series: []string{"nope"}, Bars: true}}
	if err := WritePNG(&bytes.Buffer{}, r); err == nil {
		t.Error("unknown label column accepted")
	}
	r.Plots = []Plot{{Title: "bars", Y: "p50", Series: []string{r.Columns[0].Name}, Bars: true}}
	var png bytes.Buffer
	if err := WritePNG(&png, r); err != nil || png.Len() == 0 {
		t.Errorf("bar chart: %v, %d bytes", err, png.Len())
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[any]string{nil: "—", 3: "3", 0.0: "0", 12.3456: "12.35", 0.0812: "0.08120", 123456.7: "123457", 2e-7: "2e-07", "a|b": `a\|b`} {
		if got := FormatValue(v); got != want {
			t.Errorf("FormatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestEnv(t *testing.T) {
	e := newEnv(Options{})
	if e.PointDuration(time.Second, time.Millisecond) != time.Second {
		t.Error("full")
	}
	e.Quick = true
	if e.PointDuration(time.Second, time.Millisecond) != time.Millisecond {
		t.Error("quick")
	}
	e.Duration = 7 * time.Millisecond
	if e.PointDuration(time.Second, time.Millisecond) != 7*time.Millisecond {
		t.Error("explicit")
	}
	if a, b := e.DeviceBase("x"), e.DeviceBase("x"); a == b || !strings.HasPrefix(a, "loop://x-") {
		t.Errorf("DeviceBase = %q, %q", a, b)
	}
	e.Transport = "loop://mine/"
	if e.DeviceBase("x") != "loop://mine" {
		t.Error("explicit transport")
	}
	// Not a terminal: no bar, and the hidden bar is safe to use.
	var buf bytes.Buffer
	e.Options.Progress = &buf
	p := e.Progress(10, time.Hour, "x")
	p.Add(1)
	p.Describe("y")
	p.Finish()
	if buf.Len() != 0 {
		t.Errorf("progress written to a non-terminal: %q", buf.String())
	}
	p = newProgress(&buf, 10, "x", true)
	p.Add(1)
	p.Finish()
	if buf.Len() == 0 {
		t.Error("a shown bar wrote nothing")
	}
}

func TestQuickPerfRun(t *testing.T) {
	dir := t.TempDir()
	r, paths, err := Run(context.Background(), "perf", Options{Quick: true, Duration: 5 * time.Millisecond, OutDir: dir, Poll: verbs.PollAdaptive})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Fatalf("paths = %v", paths)
	}
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	if r.Meta.Transport != "loop" || !strings.HasPrefix(r.Meta.Device, "loop://perf-") || r.Meta.Elapsed == "" {
		t.Errorf("meta: %+v", r.Meta)
	}
	rate, bw, test, op := r.Column("rate"), r.Column("bandwidth"), r.Column("test"), r.Column("op")
	seen := map[string]bool{}
	for _, row := range r.Rows {
		seen[row[op].(string)+" "+row[test].(string)] = true
		if row[rate].(float64) <= 0 || row[bw].(float64) <= 0 {
			t.Errorf("zero rate in %v", row)
		}
		if row[test] == "lat" && row[r.Column("p50")].(float64) <= 0 {
			t.Errorf("zero latency in %v", row)
		}
	}
	if len(seen) != 10 {
		t.Errorf("op × test combinations: %v", seen)
	}
}

func TestMemcpyGBps(t *testing.T) {
	for _, size := range []int{8, 4096, 1 << 20} {
		if gbps := MemcpyGBps(context.Background(), size, 5*time.Millisecond); gbps <= 0 {
			t.Errorf("%d bytes: %v GB/s", size, gbps)
		}
	}
	if gbps := MemcpyGBps(context.Background(), 0, time.Millisecond); gbps != 0 {
		t.Errorf("empty copy: %v GB/s", gbps)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if gbps := MemcpyGBps(ctx, 1<<20, time.Hour); gbps <= 0 || time.Since(start) > time.Minute {
		t.Errorf("cancelled probe: %v GB/s after %v", gbps, time.Since(start))
	}
}

func TestQuickPrismOpsRun(t *testing.T) {
	r, _, err := Run(context.Background(), "prism-ops", Options{Quick: true, Duration: 5 * time.Millisecond, OutDir: t.TempDir(), Poll: verbs.PollAdaptive})
	if err != nil {
		t.Fatal(err)
	}
	tr, p50, ratio, of := r.Column("transport"), r.Column("p50"), r.Column("ratio"), r.Column("ratio_of")
	perTransport := map[string]int{}
	ratios := map[string]bool{}
	for _, row := range r.Rows {
		perTransport[row[tr].(string)]++
		if row[p50].(float64) <= 0 {
			t.Errorf("zero latency in %v", row)
		}
		if row[ratio] != nil {
			if row[ratio].(float64) <= 0 {
				t.Errorf("bad ratio in %v", row)
			}
			ratios[row[tr].(string)+" "+row[of].(string)] = true
		}
	}
	if perTransport["loop"] != 8 || perTransport["tcp"] != 8 || perTransport["shm"] != 9 {
		t.Errorf("rows per transport: %v", perTransport)
	}
	for _, want := range []string{"tcp p50 / two dependent READs", "tcp p50 / three round trips", "shm p50 / read 64 B"} {
		if !ratios[want] {
			t.Errorf("no ratio %q in %v", want, ratios)
		}
	}
}

func TestQuickSmartConflictRun(t *testing.T) {
	r, _, err := Run(context.Background(), "smart-conflict", Options{Quick: true, Duration: 60 * time.Millisecond, OutDir: t.TempDir(), Poll: verbs.PollAdaptive})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 16 {
		t.Fatalf("%d rows, want 4 sizes × 4 techniques", len(r.Rows))
	}
	rate, retries := r.Column("rate"), r.Column("retries_per_op")
	for _, row := range r.Rows {
		if row[rate].(float64) <= 0 || row[retries].(float64) < 0 {
			t.Errorf("row %v", row)
		}
	}
}

func TestQuickGuidelinesRun(t *testing.T) {
	r, _, err := Run(context.Background(), "guidelines", Options{Quick: true, Duration: 20 * time.Millisecond, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 10 {
		t.Fatalf("%d rows, want 5 guidelines × 2", len(r.Rows))
	}
	rate := r.Column("rate")
	for _, row := range r.Rows {
		if row[rate].(float64) <= 0 {
			t.Errorf("row %v", row)
		}
	}
}

func TestQuickSmartDepthAndSharingRuns(t *testing.T) {
	for name, rows := range map[string]int{"smart-depth": 11, "smart-sharing": 16} {
		r, _, err := Run(context.Background(), name, Options{Quick: true, Duration: 50 * time.Millisecond, OutDir: t.TempDir()})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(r.Rows) != rows {
			t.Fatalf("%s: %d rows, want %d", name, len(r.Rows), rows)
		}
		rate := r.Column("rate")
		for _, row := range r.Rows {
			if row[rate].(float64) <= 0 {
				t.Errorf("%s: row %v", name, row)
			}
		}
	}
}

func TestQuickSequencerRun(t *testing.T) {
	r, _, err := Run(context.Background(), "sequencer", Options{Quick: true, Duration: 20 * time.Millisecond, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sys, rate := r.Column("system"), r.Column("rate")
	seen := map[string]bool{}
	for _, row := range r.Rows {
		seen[row[sys].(string)] = true
		if row[rate].(float64) <= 0 {
			t.Errorf("row %v", row)
		}
	}
	for _, want := range []string{"rdmakit FAA (one-sided)", "rdmakit RPC", "rdmakit RPC, batched", "rdmakit header-only"} {
		if !seen[want] {
			t.Errorf("no %q row in %v", want, seen)
		}
	}
}

func TestQuickKVRuns(t *testing.T) {
	for _, name := range []string{"kv-ycsb", "kv-demo"} {
		t.Run(name, func(t *testing.T) {
			r, _, err := Run(context.Background(), name, Options{Quick: true, Duration: 30 * time.Millisecond, OutDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			st, rate, rtt := r.Column("store"), r.Column("rate"), r.Column("round_trips")
			seen := map[string]bool{}
			for _, row := range r.Rows {
				seen[row[st].(string)] = true
				if row[rate].(float64) <= 0 || row[rtt].(float64) < 1 {
					t.Errorf("row %v", row)
				}
			}
			for _, d := range KVDesigns {
				if !seen[d] {
					t.Errorf("no %s row", d)
				}
			}
		})
	}
}

// TestQuickKVPeersWithoutCommand: without Options.Command the rdmakit
// rows are left out with the reason; memcached's and Redis's rows are
// there when they are installed (else their notes say why not), each
// with its batch and server CPU.
func TestQuickKVPeersWithoutCommand(t *testing.T) {
	r, _, err := Run(context.Background(), "kv-peers", Options{Quick: true, Duration: 30 * time.Millisecond, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "rdmakit stores: no rows") {
		t.Errorf("no note on the missing rdmakit rows:\n%s", notes)
	}
	systems := map[string]bool{}
	for _, row := range r.Rows {
		systems[row[r.Column("system")].(string)] = true
		if b, ok := row[r.Column("batch")].(float64); !ok || b < 1 {
			t.Errorf("row without a batch: %v", row)
		}
		if row[r.Column("server_cpu")] == nil {
			t.Errorf("row without server CPU: %v", row)
		}
	}
	for _, want := range []struct{ row, bin string }{
		{"memcached -t 1", "memcached"}, {"memcached -t 2 multi-get", "memcached"}, {"Redis", "redis-server"}, {"Redis MGET", "redis-server"},
	} {
		if _, err := exec.LookPath(want.bin); err != nil {
			if !strings.Contains(notes, want.row+": no rows") && !strings.Contains(notes, strings.Fields(want.row)[0]) {
				t.Errorf("%s missing without a note:\n%s", want.row, notes)
			}
			continue
		}
		if !systems[want.row] {
			t.Errorf("no %s row: %v", want.row, systems)
		}
	}
}

// TestBTreeYCSBOnly: --only names btree-ycsb's rows (case aside); a
// selection without Redis starts no Redis (no Redis row even where it
// is installed), the rdmakit rows without Options.Command are left out
// with the reason, and a selection of none is ErrNoSystem.
func TestBTreeYCSBOnly(t *testing.T) {
	ctx := context.Background()
	r, _, err := Run(ctx, "btree-ycsb", Options{Quick: true, Duration: 20 * time.Millisecond, Only: []string{"smart-bt", "Sherman"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 0 {
		t.Fatalf("rows without the rdmakit command or Redis: %v", r.Rows)
	}
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "sherman design's rows: none") || strings.Contains(notes, "rpc design") || strings.Contains(notes, "Redis: no rows") {
		t.Errorf("notes:\n%s", notes)
	}
	_, _, err = Run(ctx, "btree-ycsb", Options{Quick: true, Only: []string{"Sherman++"}})
	if !errors.Is(err, ErrNoSystem) || !strings.Contains(err.Error(), "spec-lookup") {
		t.Fatalf("--only Sherman++: %v", err)
	}
}
