package sock

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestStreamIntegrity sends a pseudo-random byte stream in writes of random
// sizes through small rings (so records wrap, pad and straddle the ring's
// end many times) in both directions at once, and checks every byte.
func TestStreamIntegrity(t *testing.T) {
	for _, tr := range []string{"shm", "tcp"} {
		for _, mode := range []Mode{Direct, SP2C, SPSC} {
			for _, slicing := range []bool{true, false} {
				name := tr + "/" + mode.String()
				if !slicing {
					name += "/noslicing"
				}
				t.Run(name, func(t *testing.T) {
					cfg := Config{Mode: mode, RingSize: 64 << 10, MTU: 4000, NoSlicing: !slicing, ReadBuffer: 48 << 10, Partitions: 1}
					c1, c2, done := pipe(t, cfg, tr)
					defer done()
					defer c1.Close()
					defer c2.Close()
					const total = 3 << 20
					var wg sync.WaitGroup
					for dir, pair := range [][2]*Conn{{c1, c2}, {c2, c1}} {
						src := make([]byte, total)
						rng := rand.New(rand.NewPCG(uint64(dir), 7))
						for i := range src {
							src[i] = byte(rng.Uint32())
						}
						wg.Add(2)
						go func() {
							defer wg.Done()
							for off := 0; off < total; {
								n := min(1+rng.IntN(70000), total-off)
								if _, err := pair[0].Write(src[off : off+n]); err != nil {
									t.Errorf("write: %v", err)
									return
								}
								off += n
							}
						}()
						go func() {
							defer wg.Done()
							got := make([]byte, total)
							r := rand.New(rand.NewPCG(uint64(dir), 9))
							for off := 0; off < total; {
								n, err := pair[1].Read(got[off:min(total, off+1+r.IntN(50000))])
								if err != nil {
									t.Errorf("read at %d: %v", off, err)
									return
								}
								off += n
							}
							if !bytes.Equal(got, src) {
								i := 0
								for got[i] == src[i] {
									i++
								}
								t.Errorf("direction %d: stream differs at byte %d", dir, i)
							}
						}()
					}
					wg.Wait()
					// Half-close: the peer reads EOF after everything.
					if err := c1.CloseWrite(); err != nil {
						t.Fatal(err)
					}
					if n, err := c2.Read(make([]byte, 10)); err != io.EOF {
						t.Fatalf("after CloseWrite: %d, %v; want EOF", n, err)
					}
					if _, err := c2.Write([]byte("still open")); err != nil {
						t.Fatalf("write after the peer's CloseWrite: %v", err)
					}
					buf := make([]byte, 10)
					if _, err := io.ReadFull(c1, buf); err != nil || string(buf) != "still open" {
						t.Fatalf("read after CloseWrite: %q, %v", buf, err)
					}
				})
			}
		}
	}
}

// TestDialerAdoptsPartitions: a dialer configured with another partition
// count adopts the listener's.
func TestDialerAdoptsPartitions(t *testing.T) {
	ctx := context.Background()
	ln, err := Config{Partitions: 3}.Listen(ctx, testURI(t, "shm"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := &Dialer{Config: Config{Partitions: 1}}
	seen := map[int]bool{}
	for i := 0; i < 3; i++ {
		c, err := d.Dial(ctx, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if c.Partition() != a.(*Conn).Partition() {
			t.Fatalf("ends in partitions %d and %d", c.Partition(), a.(*Conn).Partition())
		}
		seen[c.Partition()] = true
	}
	if len(seen) != 3 {
		t.Fatalf("3 connections used partitions %v, want 0, 1 and 2 (round-robin)", seen)
	}
}

// TestDialerClose: Close resets the Dialer's connections and frees its
// links; the listener's side sees the reset; dialing again works.
func TestDialerClose(t *testing.T) {
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			ctx := context.Background()
			ln, err := Listen(ctx, testURI(t, tr))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			d := &Dialer{}
			c, err := d.Dial(ctx, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			a, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			d.Close()
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrReset) {
				t.Fatalf("dialer's Read after Dialer.Close: %v, want ErrReset", err)
			}
			a.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := a.Read(make([]byte, 1)); !errors.Is(err, ErrReset) || !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("listener's Read after Dialer.Close: %v, want ErrReset (ECONNRESET)", err)
			}
			c2, err := d.Dial(ctx, ln.Addr().String())
			if err != nil {
				t.Fatalf("dial after Close: %v", err)
			}
			defer c2.Close()
			a2, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer a2.Close()
			if _, err := c2.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(a2, make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
			d.Close()
		})
	}
}

// TestListenerCloseEndsIdleLinks: after Listener.Close, accepted
// connections go on; once they close, the link ends and dialing fails.
func TestListenerCloseEndsIdleLinks(t *testing.T) {
	ctx := context.Background()
	ln, err := Listen(ctx, testURI(t, "shm"))
	if err != nil {
		t.Fatal(err)
	}
	d := &Dialer{}
	defer d.Close()
	c, err := d.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := c.Write([]byte("after close")); err != nil {
		t.Fatalf("accepted connection after Listener.Close: %v", err)
	}
	buf := make([]byte, 11)
	if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "after close" {
		t.Fatalf("read %q, %v", buf, err)
	}
	a.Close()
	c.Close()
	alive := func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, l := range d.links {
			if l.alive() {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(5 * time.Second); alive(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the dialer's link outlived the closed listener's last connection by 5 s")
		}
	}
	if _, err := d.Dial(ctx, ln.Addr().String()); !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("dial after the listener closed: %v, want ErrNoEndpoint", err)
	}
}
