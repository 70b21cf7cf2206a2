package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/objstore/node"
)

// startObjstore runs `rdmakit objstore serve ARGS…` from this test binary
// in its own process and returns its announcement; the store is stopped
// (SIGTERM, then checked to exit 0) when the test ends.
func startObjstore(t *testing.T, args ...string) node.Announcement {
	t.Helper()
	cmd := selfCommand(context.Background(), append([]string{"objstore", "serve"}, args...)...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("objstore serve exited with %v after SIGTERM; stderr: %s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("objstore serve still ran 10 s after SIGTERM")
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	a, perr := node.ParseAnnouncement(line)
	if perr != nil {
		t.Fatalf("announced %q (%v, %v); stderr: %s", line, err, perr, stderr.String())
	}
	return a
}

// objCLI runs `rdmakit objstore ARGS…` in this process with stdin and
// returns its stdout, failing the test unless it exits 0.
func objCLI(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	out, errOut, code := objCLIExit(t, stdin, args...)
	if code != 0 {
		t.Fatalf("rdmakit objstore %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// objCLIExit runs `rdmakit objstore ARGS…` and returns its output and
// exit code.
func objCLIExit(t *testing.T, stdin []byte, args ...string) ([]byte, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRootCmd(&stdout, &stderr, &profiling{})
	root.SetIn(bytes.NewReader(stdin))
	root.SetArgs(append([]string{"objstore"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(&stderr, err)
		return stdout.Bytes(), stderr.String(), 1
	}
	return stdout.Bytes(), stderr.String(), 0
}

// payload is n bytes that differ by seed.
func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13) ^ seed
	}
	return b
}

// TestObjstoreLocalCommands: put (stdin and a file), get, ls, rm against
// one store process; the bytes come back unchanged and a removed object
// is gone.
func TestObjstoreLocalCommands(t *testing.T) {
	sock := fmt.Sprintf("@rdmakit-cmdtest-obj-%d", os.Getpid())
	a := startObjstore(t, "--mem", "64MiB", "--socket", sock, "--stats", "127.0.0.1:0")
	if a.Socket != sock || a.Stats == "" || strings.HasSuffix(a.Stats, ":0") {
		t.Fatalf("announcement %+v", a)
	}
	small := payload(4097, 1)
	id1 := strings.TrimSpace(string(objCLI(t, small, "put", "--socket", sock)))
	file := filepath.Join(t.TempDir(), "big")
	big := payload(3<<20+5, 2)
	if err := os.WriteFile(file, big, 0o600); err != nil {
		t.Fatal(err)
	}
	const id2 = "00112233445566778899aabbccddeeff00112233"
	if got := strings.TrimSpace(string(objCLI(t, nil, "put", "--socket", sock, "--id", id2, file))); got != id2 {
		t.Fatalf("put --id printed %q", got)
	}
	for id, want := range map[string][]byte{id1: small, id2: big} {
		got := objCLI(t, nil, "get", "--socket", sock, id)
		if crc32.ChecksumIEEE(got) != crc32.ChecksumIEEE(want) || len(got) != len(want) {
			t.Fatalf("get %s: %d bytes, CRC differs from the %d put", id, len(got), len(want))
		}
	}
	ls := string(objCLI(t, nil, "ls", "--socket", sock))
	if !strings.Contains(ls, id1) || !strings.Contains(ls, id2) || !strings.Contains(ls, fmt.Sprint(len(big))) {
		t.Fatalf("ls does not list both objects:\n%s", ls)
	}
	if _, _, code := objCLIExit(t, nil, "put", "--socket", sock, "--id", id2, file); code == 0 {
		t.Fatal("a second put of one ID succeeded")
	}
	objCLI(t, nil, "rm", "--socket", sock, id1, id2)
	if _, errOut, code := objCLIExit(t, nil, "get", "--socket", sock, id1); code == 0 || !strings.Contains(errOut, "not found") {
		t.Fatalf("get of a removed object: exit %d, %q", code, errOut)
	}
	st, err := node.ReadStats(context.Background(), a.Stats)
	if err != nil {
		t.Fatal(err)
	}
	if st.Store.Objects != 0 || st.Store.BytesAllocated != 0 {
		t.Fatalf("after rm the store holds %d objects, %d bytes", st.Store.Objects, st.Store.BytesAllocated)
	}
	if _, _, code := objCLIExit(t, nil, "get", "--socket", sock, "not-an-id"); code == 0 {
		t.Fatal("get of a malformed ID succeeded")
	}
}

// TestObjstoreFetchAcrossStores: two store processes, a holder and a
// fetcher per protocol; objects of sizes around the threshold and the
// slot size put on the holder come back from the fetcher byte for byte
// (`get --fetch`), and a fetch of an ID no peer holds fails with
// ErrUnavailable.
func TestObjstoreFetchAcrossStores(t *testing.T) {
	pid := os.Getpid()
	holder := startObjstore(t, "--mem", "64MiB", "--socket", fmt.Sprintf("@rdmakit-cmdtest-h-%d", pid),
		"--listen", "127.0.0.1:0", "--tcp-listen", "127.0.0.1:0")
	if holder.Verbs == "" || holder.TCP == "" {
		t.Fatalf("holder announced %+v", holder)
	}
	sizes := []int{0, 1, 4095, 4096, 4097, 32<<10 - 1, 32 << 10, 32<<10 + 1, 64 << 10, 1<<20 + 3}
	ids := map[string][]byte{}
	for i, n := range sizes {
		b := payload(n, byte(i))
		ids[strings.TrimSpace(string(objCLI(t, b, "put", "--socket", holder.Socket)))] = b
	}
	for _, proto := range []string{"hybrid", "sendrecv", "read", "tcp4k", "tcpbulk"} {
		peer := holder.Verbs
		if strings.HasPrefix(proto, "tcp") {
			peer = holder.TCP
		}
		f := startObjstore(t, "--mem", "64MiB", "--socket", fmt.Sprintf("@rdmakit-cmdtest-f-%s-%d", proto, pid),
			"--peers", peer, "--protocol", proto)
		for id, want := range ids {
			got := objCLI(t, nil, "get", "--socket", f.Socket, "--fetch", id)
			if len(got) != len(want) || crc32.ChecksumIEEE(got) != crc32.ChecksumIEEE(want) {
				t.Fatalf("%s: fetched %s: %d bytes, CRC differs from the %d put", proto, id, len(got), len(want))
			}
		}
		missing := "ffffffffffffffffffffffffffffffffffffffff"
		if _, errOut, code := objCLIExit(t, nil, "fetch", "--socket", f.Socket, missing); code == 0 || !strings.Contains(errOut, "unavailable") {
			t.Fatalf("%s: fetch of an ID no peer holds: exit %d, %q", proto, code, errOut)
		}
	}
}

// TestObjstoreTune measures two sizes against a holder tune starts and
// prints a row for each and a threshold line.
func TestObjstoreTune(t *testing.T) {
	out := string(objCLI(t, nil, "tune", "--sizes", "1KiB,256KiB", "--runs", "2"))
	for _, want := range []string{"1 KiB", "256 KiB", "threshold: "} {
		if !strings.Contains(out, want) {
			t.Fatalf("tune printed no %q:\n%s", want, out)
		}
	}
}

// TestObjstoreBenchQuick runs both object-store experiments quickly
// through `rdmakit bench run`, whose stores are this binary in their own
// processes (bench.Options.Command).
func TestObjstoreBenchQuick(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "res")
	out, errs, code := execute(t, "bench", "run", "objstore-local", "--quick", "--out", dir)
	if code != 0 {
		t.Fatalf("objstore-local: exit %d: %s", code, errs)
	}
	mustContain(t, out, "| op | size [B] | p50 [µs] |", "| get | 67108864 |", "get(64 MiB)/get(1 KiB) p50")
	out, errs, code = execute(t, "bench", "run", "objstore-fetch", "--quick", "--only", "hybrid,tcp4k", "--out", dir)
	if code != 0 {
		t.Fatalf("objstore-fetch: exit %d: %s", code, errs)
	}
	mustContain(t, out, "| hybrid | 4194304 |", "| tcp4k | 1024 |", "Hybrid/TCP4K GB/s at 4 MiB")
	if strings.Contains(out, "| sendrecv |") || strings.Contains(out, "| redis |") {
		t.Fatalf("--only hybrid,tcp4k measured other systems:\n%s", out)
	}
}
