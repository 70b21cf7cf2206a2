package sock

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestLargeRecords: large MTUs, or no slicing, over both transports — a
// Write of 1 MiB arrives whole, either way. (sock's shm device takes WRITEs of at most a
// quarter of its rings; a link whose MTU was larger failed at its first
// full record.)
func TestLargeRecords(t *testing.T) {
	for _, tr := range transports {
		for _, c := range []struct {
			name string
			cfg  Config
		}{
			{"mtu-64KiB", Config{MTU: 64 << 10}},
			{"mtu-1MiB", Config{MTU: 1 << 20, RingSize: 4 << 20}},
			{"no-slicing", Config{NoSlicing: true, RingSize: 4 << 20}},
		} {
			t.Run(tr+"/"+c.name, func(t *testing.T) {
				a, b, stop := pipe(t, c.cfg, tr)
				defer stop()
				defer a.Close()
				defer b.Close()
				msg := pattern(1<<20, 1)
				for _, dir := range [][2]*Conn{{a, b}, {b, a}} {
					if err := oneWay(dir[0], dir[1], msg); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// oneWay writes msg on w and reads it whole on r.
func oneWay(w, r *Conn, msg []byte) error {
	w.SetWriteDeadline(time.Now().Add(faultTimeout))
	r.SetReadDeadline(time.Now().Add(faultTimeout))
	errc := make(chan error, 1)
	go func() {
		_, err := w.Write(msg)
		errc <- err
	}()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(r, got); err != nil {
		return fmt.Errorf("read: %w (write: %v)", err, <-errc)
	}
	if err := <-errc; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if !bytes.Equal(got, msg) {
		return errors.New("the message arrived changed")
	}
	return nil
}
