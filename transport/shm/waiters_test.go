package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/nic"
)

// TestWaiterHandsProgressToNIC: while a goroutine is blocked in CQ.Wait,
// the NIC goroutine drives the rings and parks on the device's bell (so a
// peer's answer wakes it), even when other goroutines keep polling. It
// used to take the moving poll count for "the application does the
// work" and sleep on a timer between looks every ExpireEvery: a GET whose
// answer came meanwhile waited up to 10 ms (or, when its ring's poller
// skipped it, longer), while the others' polls found their own
// completions and drove nothing.
func TestWaiterHandsProgressToNIC(t *testing.T) {
	d, err := open(fmt.Sprintf("waiters-%d", os.Getpid()), options{ring: DefaultRing, spin: DefaultSpin, dialTimeout: time.Second, deposit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // an application goroutine polling its CQ
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			d.polls.Add(1)
			runtime.Gosched()
		}
	}()
	defer func() { close(stop); <-done }()
	parked := func(within time.Duration) bool {
		for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(50 * time.Microsecond) {
			if atomic.LoadUint32(d.seg.parked()) == 1 {
				return true
			}
		}
		return false
	}
	// A new device's NIC goroutine parks on the bell at once (nobody
	// polls yet); it looks again within ExpireEvery and, finding the
	// application polling, stays off the bell from then on.
	time.Sleep(5 * nic.ExpireEvery)
	if parked(30 * time.Millisecond) {
		t.Fatal("the NIC goroutine parked on the bell while the application polled: it should stay out of the way")
	}
	d.idle() // a goroutine blocks in CQ.Wait
	if !parked(time.Second) {
		t.Fatal("a goroutine waits in CQ.Wait, yet the NIC goroutine never parked on the bell (a peer's answer cannot wake it)")
	}
	d.awake()
}

// TestCancelledWaitHandsBack: a goroutine whose context ends while it is
// blocked in CQ.Wait leaves the count of waiters as it found it (Awake
// runs on every way out), so the NIC goroutine goes back to staying out
// of the application's way.
func TestCancelledWaitHandsBack(t *testing.T) {
	d, err := open(fmt.Sprintf("waiters-cancel-%d", os.Getpid()), options{ring: DefaultRing, spin: DefaultSpin, dialTimeout: time.Second, deposit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cq, err := d.CreateCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cq.Wait(ctx) }()
	for deadline := time.Now().Add(time.Second); d.waiters.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters while a goroutine is blocked in CQ.Wait", d.waiters.Load())
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after its context ended: %v", err)
	}
	if n := d.waiters.Load(); n != 0 {
		t.Fatalf("%d waiters after the only one's context ended", n)
	}
}
