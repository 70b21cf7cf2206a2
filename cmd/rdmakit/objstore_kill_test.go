package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/node"
)

// startKillable runs `rdmakit objstore serve ARGS…` in its own process
// and returns its announcement and a function that kill -9s it.
func startKillable(t *testing.T, args ...string) (node.Announcement, func()) {
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
	killed := false
	kill := func() {
		if !killed {
			killed = true
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
		}
	}
	t.Cleanup(kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	a, perr := node.ParseAnnouncement(line)
	if perr != nil {
		t.Fatalf("announced %q (%v, %v); stderr: %s", line, err, perr, stderr.String())
	}
	return a, kill
}

// TestObjstoreHolderKilledMidFetch kill -9s the holding store while a
// fetching store pulls a 48 MiB object from it, by each protocol, at
// several moments. A fetch either completes with the right bytes or
// fails with ErrUnavailable — and then the fetching store holds nothing
// of the object: no object, sealed or not, no allocated bytes, no pins,
// no fetch still running.
func TestObjstoreHolderKilledMidFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts store processes")
	}
	const size = 48 << 20
	pid := os.Getpid()
	want := payload(size, 7)
	sum := crc32.ChecksumIEEE(want)
	ctx := context.Background()
	for _, proto := range []string{"hybrid", "sendrecv", "tcpbulk"} {
		failed := 0
		for i, delay := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
			holder, kill := startKillable(t, "--mem", "64MiB", "--socket", fmt.Sprintf("@rdmakit-killtest-h-%d-%s-%d", pid, proto, i),
				"--listen", "127.0.0.1:0", "--tcp-listen", "127.0.0.1:0")
			id := strings.TrimSpace(string(objCLI(t, want, "put", "--socket", holder.Socket)))
			oid, err := objstore.ParseID(id)
			if err != nil {
				t.Fatal(err)
			}
			peer := holder.Verbs
			if strings.HasPrefix(proto, "tcp") {
				peer = holder.TCP
			}
			f := startObjstore(t, "--mem", "64MiB", "--socket", fmt.Sprintf("@rdmakit-killtest-f-%d-%s-%d", pid, proto, i),
				"--peers", peer, "--protocol", proto, "--stats", "127.0.0.1:0")
			c, err := objstore.Connect(ctx, f.Socket)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				errs, err := c.Fetch(ctx, []objstore.ID{oid})
				if err == nil {
					err = errs[0]
				}
				done <- err
			}()
			time.Sleep(delay)
			kill()
			var ferr error
			select {
			case ferr = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s, kill after %v: Fetch still running 20 s after the holder's kill", proto, delay)
			}
			st, err := node.ReadStats(ctx, f.Stats)
			if err != nil {
				t.Fatal(err)
			}
			s := st.Store
			if ferr == nil {
				got, err := c.Get(ctx, []objstore.ID{oid}, 0)
				if err != nil || got[0] == nil || crc32.ChecksumIEEE(got[0].Data) != sum {
					t.Fatalf("%s, kill after %v: fetch succeeded but the object is wrong: %v", proto, delay, err)
				}
				c.Release(ctx, oid)
			} else {
				failed++
				if !errors.Is(ferr, objstore.ErrUnavailable) {
					t.Errorf("%s, kill after %v: Fetch failed with %v, want ErrUnavailable", proto, delay, ferr)
				}
				if s.Objects != 0 || s.BytesAllocated != 0 || s.Pins != 0 || s.Fetches != 0 {
					t.Errorf("%s, kill after %v: after the failed fetch the store has %d objects (%d unsealed), %d bytes allocated, %d pins, %d fetches running; want none",
						proto, delay, s.Objects, s.Unsealed, s.BytesAllocated, s.Pins, s.Fetches)
				}
				if ok, err := c.Contains(ctx, oid); err != nil || ok {
					t.Errorf("%s, kill after %v: Contains after the failed fetch: %v, %v", proto, delay, ok, err)
				}
			}
			c.Close()
		}
		t.Logf("%s: %d of 4 fetches failed with the holder killed under them", proto, failed)
		if failed == 0 {
			t.Errorf("%s: no kill landed mid-transfer (every fetch of 48 MiB finished first)", proto)
		}
	}
}
