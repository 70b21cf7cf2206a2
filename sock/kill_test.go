package sock

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
)

// A peer process that dies — kill -9, mid-message — must reset its
// connections here promptly (ErrReset, not io.EOF, not a hang), leave this
// process's other connections alone, and leave nothing behind: no file
// descriptor, no mapping, no goroutine.

// writerRole is a child that dials the listener at its argument's URI and
// writes a large message, over and over, on each of its connections until
// it is killed.
const writerRole = "sock-writer"

// listenerRole is a child that listens (its argument is the transport),
// says "ready URI", and writes a large message, over and over, on each
// connection it accepts, reading nothing, until it is killed.
const listenerRole = "sock-listener"

func init() {
	remotedev.Role(writerRole, runWriter)
	remotedev.Role(listenerRole, runListener)
}

// killConfig is the Config of both sides of the kill tests: small rings
// and windows, so that a hundred links cost little memory.
func killConfig() Config {
	return Config{Partitions: 2, RingSize: 256 << 10, MTU: 16 << 10, ReadBuffer: 256 << 10}
}

// runWriter is the writer child's main; arg is "URI,CONNS".
func runWriter(arg string) int {
	uri, n, _ := strings.Cut(arg, ",")
	conns, err := strconv.Atoi(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "writer: bad argument", arg)
		return 2
	}
	// The parent gone (its end of stdin closed), the child goes too.
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	cfg := killConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	d := &Dialer{Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	msg := pattern(16<<20, 3)
	for i := 0; i < conns; i++ {
		c, err := d.Dial(ctx, uri)
		if err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			return 1
		}
		go func() {
			for {
				if _, err := c.Write(msg); err != nil {
					return
				}
			}
		}()
	}
	fmt.Println("ready")
	select {}
}

// runListener is the listener child's main.
func runListener(transport string) int {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	cfg := killConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	ln, err := cfg.Listen(ctx, testURI(nil, transport))
	if err != nil {
		fmt.Fprintln(os.Stderr, "listener:", err)
		return 1
	}
	fmt.Println("ready", ln.Addr())
	msg := pattern(16<<20, 6)
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		go func() {
			for {
				if _, err := c.Write(msg); err != nil {
					return
				}
			}
		}()
	}
}

// startWriters starts k writer children with conns connections each to
// ln, accepts their connections and reads at least min bytes from each
// (each is then in the middle of a 16 MiB Write).
func startWriters(t testing.TB, ln *Listener, k, conns, min int) ([]*remotedev.Child, []*Conn) {
	t.Helper()
	arg := ln.Addr().String() + "," + strconv.Itoa(conns)
	children := make([]*remotedev.Child, k)
	for i := range children {
		ch, err := remotedev.StartChild(writerRole, arg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ch.Kill(faultTimeout) })
		children[i] = ch
	}
	for _, ch := range children {
		if _, err := ch.Expect("ready"); err != nil {
			t.Fatal(err)
		}
	}
	accepted := make([]*Conn, k*conns)
	for i := range accepted {
		c, err := acceptWithin(ln, faultTimeout)
		if err != nil {
			t.Fatal(err)
		}
		accepted[i] = c
	}
	buf := make([]byte, 64<<10)
	for _, c := range accepted {
		c.SetReadDeadline(time.Now().Add(faultTimeout))
		for got := 0; got < min; {
			n, err := c.Read(buf)
			if err != nil {
				t.Fatalf("read from a live writer: %v", err)
			}
			got += n
		}
		c.SetReadDeadline(time.Time{})
	}
	return children, accepted
}

// acceptWithin accepts a connection or gives up after d.
func acceptWithin(ln *Listener, d time.Duration) (*Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return r.c.(*Conn), nil
	case <-time.After(d):
		ln.Close() // ends the Accept above
		return nil, fmt.Errorf("no connection accepted in %v", d)
	}
}

// killAll kills the children with SIGKILL and waits for them.
func killAll(t testing.TB, children []*remotedev.Child) {
	t.Helper()
	for _, ch := range children {
		if err := ch.Process().Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range children {
		if err := ch.Kill(faultTimeout); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPeerKilledMidMessage: a writer child with two connections is killed
// mid-message. Each connection here reads what had arrived, then a reset
// (ErrReset, ECONNRESET), within faultTimeout; this process's connection
// from another dialer goes on.
func TestPeerKilledMidMessage(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			rig := newFaultRig(t, killConfig(), tr)
			good, goodAcc := rig.dial(rig.dialer())
			children, conns := startWriters(t, rig.ln, 1, 2, 1<<20)
			killAll(t, children)
			start := time.Now()
			for _, c := range conns {
				expectReset(t, c, false, "a killed writer's connection")
				c.Close()
			}
			t.Logf("resets within %v of the kill", time.Since(start))
			if err := roundTrip(good, goodAcc, pattern(256<<10, 4)); err != nil {
				t.Fatalf("another dialer's connection after the kill: %v", err)
			}
		})
	}
}

// TestListenerKilledMidMessage: the other way round — this process dialed
// a listener child, which is killed while it writes to two connections and
// while a Write here waits for credit (the child reads nothing). The Reads
// return a reset after what had arrived, the blocked Write a reset, within
// faultTimeout; a connection to a listener of this process goes on.
func TestListenerKilledMidMessage(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			rig := newFaultRig(t, killConfig(), tr)
			good, goodAcc := rig.dial(rig.dialer())
			child, err := remotedev.StartChild(listenerRole, tr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { child.Kill(faultTimeout) })
			f, err := child.Expect("ready")
			if err != nil {
				t.Fatal(err)
			}
			d := rig.dialer()
			ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
			defer cancel()
			var conns []*Conn
			for i := 0; i < 2; i++ {
				c, err := d.Dial(ctx, f[0])
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns = append(conns, c)
			}
			buf := make([]byte, 64<<10)
			for _, c := range conns {
				c.SetReadDeadline(time.Now().Add(faultTimeout))
				for got := 0; got < 1<<20; {
					n, err := c.Read(buf)
					if err != nil {
						t.Fatalf("read from the live listener: %v", err)
					}
					got += n
				}
			}
			// 4 MiB, over the child's window: it cannot end before the kill.
			wrote := make(chan error, 1)
			go func() {
				_, err := conns[0].Write(pattern(4<<20, 9))
				wrote <- err
			}()
			killAll(t, []*remotedev.Child{child})
			for _, c := range conns {
				expectReset(t, c, false, "a connection to the killed listener")
			}
			select {
			case err := <-wrote:
				if !isReset(err) {
					t.Fatalf("the blocked Write ended with %v, want a reset", err)
				}
			case <-time.After(faultTimeout):
				t.Fatal("the blocked Write did not end after the peer was killed")
			}
			if err := roundTrip(good, goodAcc, pattern(256<<10, 4)); err != nil {
				t.Fatalf("another connection after the kill: %v", err)
			}
		})
	}
}

// resources counts what this process holds that a dead peer's links could
// leak: open file descriptors, memory mappings (all; those of files, memfds
// among them; those of memfds — the shm windows, staging regions and
// rings), goroutines.
type resources struct {
	fds, maps, files, memfds, goroutines int
	fdList, mapList                      []string
}

func countResources(t testing.TB) resources {
	t.Helper()
	var r resources
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		r.fdList = append(r.fdList, e.Name()+" -> "+target)
	}
	r.fds = len(ents)
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		r.maps++
		if f := strings.Fields(sc.Text()); len(f) >= 6 && strings.HasPrefix(f[5], "/") {
			r.files++
		}
		if strings.Contains(sc.Text(), "/memfd:") {
			r.memfds++
			r.mapList = append(r.mapList, sc.Text())
		}
	}
	r.goroutines = runtime.NumGoroutine()
	return r
}

// Slack over the baseline, for what is not a leak: anonymous mappings come
// as the process grows — heap arenas, the stacks (and guard pages) of the
// OS threads the runtime starts when many goroutines block at once, the C
// library's per-thread malloc arenas; about a dozen over a few hundred
// deaths here, bounded by the thread count, not the deaths. Goroutines of
// the testing package's own come and go. The race detector's shadow
// memory adds more. Descriptors and file mappings (memfds: a link's
// window, staging region, shm rings) have none.
//
// Over tcp a link's regions are anonymous mappings, which the kernel merges
// with their neighbours: the line count does not see them, and this test
// checks tcp's descriptors and goroutines only.
const goroutineSlack = 4

func mapSlack() int {
	if raceEnabled {
		return 128
	}
	return 32
}

func (r resources) within(base resources) bool {
	return r.fds <= base.fds && r.files <= base.files && r.memfds <= base.memfds &&
		r.maps <= base.maps+mapSlack() && r.goroutines <= base.goroutines+goroutineSlack
}

// TestPeerDeathsLeakNothing: a hundred writer children (ten under -short)
// dial, write and are killed mid-message, in batches; once their links
// are torn down, this process has as many descriptors and memfd mappings
// as before, and about as many mappings and goroutines.
func TestPeerDeathsLeakNothing(t *testing.T) {
	deaths, batch := 100, 10
	if testing.Short() {
		deaths, batch = 10, 5
	}
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			rig := newFaultRig(t, killConfig(), tr)
			good, goodAcc := rig.dial(rig.dialer())
			die := func(k int) {
				children, conns := startWriters(t, rig.ln, k, 1, 64<<10)
				killAll(t, children)
				for _, c := range conns {
					expectReset(t, c, false, "a killed writer's connection")
					c.Close()
				}
			}
			// A first death starts what lives on after it (the device's
			// per-peer machinery, pools); then the baseline.
			die(1)
			base := waitSettled(t, nil)
			start := time.Now()
			for done := 0; done < deaths; done += batch {
				die(min(batch, deaths-done))
				if err := roundTrip(good, goodAcc, pattern(64<<10, 5)); err != nil {
					t.Fatalf("another dialer's connection after %d deaths: %v", done, err)
				}
			}
			after := waitSettled(t, &base)
			t.Logf("%d deaths in %v: fds %d → %d, mappings %d → %d (files %d → %d, memfds %d → %d), goroutines %d → %d",
				deaths, time.Since(start).Round(time.Millisecond), base.fds, after.fds, base.maps, after.maps,
				base.files, after.files, base.memfds, after.memfds, base.goroutines, after.goroutines)
		})
	}
}

// waitSettled waits until the resources stop falling (base nil: the
// baseline) or are within base's bounds, and returns them; it fails the
// test if they are not within base's bounds after 20 seconds.
func waitSettled(t testing.TB, base *resources) resources {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	prev := countResources(t)
	for stable := 0; ; {
		time.Sleep(20 * time.Millisecond)
		r := countResources(t)
		switch {
		case base != nil && r.within(*base):
			return r
		case base == nil && r.fds == prev.fds && r.files == prev.files && r.goroutines == prev.goroutines:
			if stable++; stable == 10 {
				return r
			}
		default:
			stable = 0
		}
		prev = r
		if time.Now().After(deadline) {
			if base == nil {
				t.Fatalf("resources never settle: %+v", r)
			}
			t.Fatalf("after the deaths: fds %d (baseline %d), mappings %d (%d), file mappings %d (%d), memfd mappings %d (%d), goroutines %d (%d)\nfds now:\n%s\nmemfd mappings now:\n%s",
				r.fds, base.fds, r.maps, base.maps, r.files, base.files, r.memfds, base.memfds, r.goroutines, base.goroutines,
				strings.Join(r.fdList, "\n"), strings.Join(r.mapList, "\n"))
		}
	}
}
