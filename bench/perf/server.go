package perf

import (
	"context"
	"errors"

	"github.com/rdmakit/rdmakit/verbs"
)

// serve is the SEND server: until ctx ends it polls the server's CQ,
// re-posts every consumed receive (adding it to the client's credits)
// and, when echo is set, answers every message with a SEND of size bytes.
func (p *Pair) serve(ctx context.Context, echo bool, size int) error {
	p.pong[0].SGL[0].Length = uint32(size)
	for {
		n, err := verbs.PollWait(ctx, p.scq, p.swc, p.cfg.Poll)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil
			}
			return err
		}
		recvs := 0
		for i := range n {
			wc := &p.swc[i]
			if wc.Status != verbs.StatusSuccess {
				return completionError(Send, size, wc)
			}
			if wc.Opcode == verbs.WCRecv {
				recvs++
			}
		}
		if recvs == 0 {
			continue
		}
		if err := p.sqp.PostRecv(p.srecv[:recvs]); err != nil {
			return err
		}
		p.credits.Add(uint64(recvs))
		if echo {
			for range recvs {
				if err := p.sqp.PostSend(p.pong); err != nil {
					return err
				}
			}
		}
	}
}

// withServer runs f while a SEND server goroutine runs. If the server
// fails, f's context is canceled and the server's error is returned.
func (p *Pair) withServer(ctx context.Context, echo bool, size int, f func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		err := p.serve(ctx, echo, size)
		if err != nil {
			cancel()
		}
		errc <- err
	}()
	err := f(ctx)
	cancel()
	if serr := <-errc; serr != nil {
		return serr
	}
	return err
}
