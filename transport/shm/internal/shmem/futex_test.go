package shmem

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// wakeUntilWoken calls Wake on w until it reports a woken waiter, which
// proves a waiter was asleep in the kernel and was woken by this call.
func wakeUntilWoken(t *testing.T, w *uint32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := Wake(w, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no waiter went to sleep within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWaitValueDiffers(t *testing.T) {
	seg := newSeg(t, 64)
	w := u32(seg.Bytes(), 0)
	atomic.StoreUint32(w, 5)
	done := make(chan error, 1)
	go func() { done <- Wait(w, 4, time.Hour) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait on a changed value: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait on a changed value blocked")
	}
	if err := Wait(w, 4, 0); err != nil {
		t.Fatalf("Wait(timeout 0) on a changed value: %v", err)
	}
}

func TestWaitTimeout(t *testing.T) {
	seg := newSeg(t, 64)
	w := u32(seg.Bytes(), 0)
	if err := Wait(w, 0, 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("timeout 0: %v, want ErrTimeout", err)
	}
	start := time.Now()
	if err := Wait(w, 0, 20*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("timeout 20ms: %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("returned after %v, before the 20ms timeout", d)
	}
}

func TestWakeArguments(t *testing.T) {
	var w uint32
	if n, err := Wake(&w, 1); n != 0 || err != nil {
		t.Errorf("Wake without waiters: %d, %v", n, err)
	}
	if _, err := Wake(&w, 0); err == nil {
		t.Error("Wake(n 0) accepted")
	}
	if n, err := Wake(&w, int(^uint(0)>>1)); n != 0 || err != nil {
		t.Errorf("Wake(all) without waiters: %d, %v", n, err)
	}
}

// TestWakeGoroutine wakes a goroutine asleep in Wait; the value never
// changes, so only the wake-up can return it.
func TestWakeGoroutine(t *testing.T) {
	seg := newSeg(t, 64)
	w := u32(seg.Bytes(), 8)
	done := make(chan error, 1)
	go func() { done <- Wait(w, 0, 10*time.Second) }()
	wakeUntilWoken(t, w)
	if err := <-done; err != nil {
		t.Fatalf("woken Wait: %v", err)
	}
}

// TestWakeAcrossMappings waits on one mapping of a memfd and wakes through
// another mapping at a different address: the futex is keyed by the
// shared page, not by the virtual address, as between processes.
func TestWakeAcrossMappings(t *testing.T) {
	a := newSeg(t, 4096)
	b, err := Open(a.FD(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wa, wb := u32(a.Bytes(), 128), u32(b.Bytes(), 128)
	done := make(chan error, 1)
	go func() { done <- Wait(wb, 0, 10*time.Second) }()
	wakeUntilWoken(t, wa)
	if err := <-done; err != nil {
		t.Fatalf("woken Wait: %v", err)
	}
}

// TestWakeChildProcess wakes a child process asleep in Wait.
func TestWakeChildProcess(t *testing.T) {
	seg := newSeg(t, testSegLen)
	b := seg.Bytes()
	c := startChild(t, "futex-wait", "", segFile(t, seg))
	waitUntil(t, 10*time.Second, "child ready", func() bool { return atomic.LoadUint32(u32(b, offReady)) == 1 })
	wakeUntilWoken(t, u32(b, offWord))
	c.wait(t)
	if atomic.LoadUint32(u32(b, offResult)) != 1 {
		t.Fatal("child did not record its wake-up")
	}
}
