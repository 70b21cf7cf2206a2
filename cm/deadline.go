package cm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// watch applies ctx to c: its deadline becomes c's deadline, and its
// cancellation interrupts c's blocked reads and writes. Call stop when
// the exchange is over.
func watch(ctx context.Context, c net.Conn) (stop func() bool) {
	d, _ := ctx.Deadline() // zero: no deadline
	_ = c.SetDeadline(d)
	return context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
}

// ioErr wraps an error of a blocking step: when ctx ended, the result
// wraps ctx's error (context.DeadlineExceeded or context.Canceled) as
// well as err.
func ioErr(ctx context.Context, step string, err error) error {
	cerr := ctx.Err()
	if cerr == nil && errors.Is(err, os.ErrDeadlineExceeded) {
		// The socket deadline is ctx's deadline; its timer may fire
		// just before ctx's.
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d.Add(-10*time.Millisecond)) {
			cerr = context.DeadlineExceeded
		}
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("cm: %s: %w: %w", step, cerr, err)
	}
	return fmt.Errorf("cm: %s: %w", step, err)
}
