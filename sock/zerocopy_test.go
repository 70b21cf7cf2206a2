package sock

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

func TestZeroCopy(t *testing.T) {
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			c1, c2, done := pipe(t, Config{MTU: 8 << 10}, tr)
			defer done()
			defer c1.Close()
			defer c2.Close()
			if err := c1.CommitSlot(1); !errors.Is(err, ErrSlotMisuse) {
				t.Fatalf("CommitSlot without WriteSlot: %v", err)
			}
			if err := c2.Release(1); !errors.Is(err, ErrSlotMisuse) {
				t.Fatalf("Release without Borrow: %v", err)
			}
			var want bytes.Buffer
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				for i := 0; i < 200; i++ {
					slot, err := c1.WriteSlot(20000)
					if err != nil {
						t.Error(err)
						return
					}
					if len(slot) > 8<<10 {
						t.Errorf("slot of %d bytes, MTU 8 KiB", len(slot))
					}
					k := max(len(slot)-i%7, 1)
					for j := range slot[:k] {
						slot[j] = byte(i + j)
					}
					want.Write(slot[:k])
					if err := c1.CommitSlot(k); err != nil {
						t.Error(err)
						return
					}
				}
				// Copying writes mix with zero-copy ones.
				c1.Write([]byte("tail"))
				want.WriteString("tail")
				c1.CloseWrite()
			}()
			var got bytes.Buffer
			for {
				b, err := c2.Borrow()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n := min(len(b), 3000) // release part: the rest comes back
				got.Write(b[:n])
				if err := c2.Release(n); err != nil {
					t.Fatal(err)
				}
			}
			<-sent
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("got %d bytes, want %d (equal prefix: %v)", got.Len(), want.Len(), bytes.HasPrefix(want.Bytes(), got.Bytes()))
			}
			if _, err := c2.Borrow(); err != io.EOF {
				t.Fatalf("Borrow after EOF: %v", err)
			}
		})
	}
}

func TestZeroCopyNeedsDirect(t *testing.T) {
	c1, c2, done := pipe(t, Config{Mode: SPSC}, "shm")
	defer done()
	defer c1.Close()
	defer c2.Close()
	if _, err := c1.WriteSlot(100); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("WriteSlot in SPSC: %v", err)
	}
}

// TestZeroCopyDeadlinesAndClose: a Borrow waiting for data ends at its
// read deadline and at Close; a WriteSlot toward a peer that never reads
// ends at its write deadline once the window is used up.
func TestZeroCopyDeadlinesAndClose(t *testing.T) {
	c1, c2, done := pipe(t, Config{ReadBuffer: 64 << 10}, "shm")
	defer done()
	defer c1.Close()
	c2.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c2.Borrow(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Borrow past its deadline: %v", err)
	}
	c2.SetReadDeadline(time.Time{})
	c1.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	var err error
	for sent := 0; err == nil && sent <= 1<<20; {
		var slot []byte
		if slot, err = c1.WriteSlot(16 << 10); err == nil {
			err = c1.CommitSlot(len(slot))
			sent += len(slot)
		}
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteSlot toward a peer that never reads: %v, want the deadline", err)
	}
	errc := make(chan error, 1)
	go func() {
		for {
			b, err := c2.Borrow()
			if err != nil {
				errc <- err
				return
			}
			c2.Release(len(b))
		}
	}()
	time.Sleep(20 * time.Millisecond)
	c2.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Borrow after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting Borrow outlived Close")
	}
}
