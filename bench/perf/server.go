package perf

import (
	"context"
	"errors"

	"github.com/rdmakit/rdmakit/verbs"
)

// serve is the in-process SEND server: until ctx ends it polls the
// server's CQ, re-posts every consumed receive (adding it to the client's
// credits) and, when echo is set, answers every message with a SEND of
// size bytes.
func (s *server) serve(ctx context.Context, echo bool, size int) error {
	s.pong[0].SGL[0].Length = uint32(size)
	for {
		n, err := verbs.PollWait(ctx, s.cq, s.wc, s.poll)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil
			}
			return err
		}
		recvs := 0
		for i := range n {
			wc := &s.wc[i]
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
		if err := s.qp.PostRecv(s.recv[:recvs]); err != nil {
			return err
		}
		s.credits.Add(uint64(recvs))
		if echo {
			for range recvs {
				if err := s.qp.PostSend(s.pong); err != nil {
					return err
				}
			}
		}
	}
}

// withServer runs f while the in-process SEND server runs. If the server
// fails, f's context is canceled and the server's error is returned.
func (s *server) withServer(ctx context.Context, echo bool, size int, f func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		err := s.serve(ctx, echo, size)
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
