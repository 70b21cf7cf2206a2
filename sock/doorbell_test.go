package sock

import (
	"context"
	"testing"
	"time"
)

// Two goroutines of one side park on one link, each reading its own
// connection. The doorbell the peer rings for the first one's data clears
// the sleeping word; the second must still get a doorbell for its own data
// (the doorbell loop renews the request while anyone sleeps) rather than
// wait for its park's safety timer (made 100 ms here, so that a wake
// within 40 ms of its data can only be a doorbell's), in each of five
// tries.
func TestDoorbellForSecondSleeper(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{Spin: -1, Partitions: 2}
	ln, err := cfg.Listen(ctx, testURI(t, "shm"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := &Dialer{Config: cfg}
	var cs, as [2]*Conn
	for i := range cs {
		if cs[i], err = d.Dial(ctx, ln.Addr().String()); err != nil {
			t.Fatal(err)
		}
		defer cs[i].Close()
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		as[i] = a.(*Conn)
		defer a.Close()
	}
	srv := as[0].l
	const timer = 100 * time.Millisecond
	srv.parkBase, srv.parkMax = timer, timer
	read := func(c *Conn) <-chan error {
		ch := make(chan error, 1)
		go func() {
			var b [1]byte
			_, err := c.Read(b[:])
			ch <- err
		}()
		return ch
	}
	for try := range 5 {
		r0, r1 := read(as[0]), read(as[1])
		for srv.sleepers.Load() < 2 {
			if ctx.Err() != nil {
				t.Fatal("the readers did not park")
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := cs[0].Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		if err := <-r0; err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := cs[1].Write([]byte{2}); err != nil {
			t.Fatal(err)
		}
		if err := <-r1; err != nil {
			t.Fatal(err)
		}
		if woke := time.Since(start); woke >= timer*2/5 {
			t.Fatalf("try %d: the second sleeper woke %v after its data: by its safety timer, not a doorbell", try, woke)
		}
	}
}
