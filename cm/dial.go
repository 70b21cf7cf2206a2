package cm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/rdmakit/rdmakit/verbs"
)

// Dial connects to the listener at addr (the TCP "host:port" of its side
// channel, Listener.Addr) and returns a connection whose QP, created on
// dev with opts, is in RTS and connected to the QP the listener created.
//
// ctx bounds the whole exchange, including the time the listener's
// application takes to accept. Dial fails with an error wrapping
// ErrPrivateDataTooLarge or verbs.ErrInvalidArg before dialing when opts
// are invalid, with a *RejectedError (ErrRejected) when the listener
// refuses, with ErrProtocol when the peer is not a valid cm listener, and
// with ctx's error when ctx ends first. On failure the QP is destroyed.
func Dial(ctx context.Context, dev verbs.Device, addr string, opts Options) (*Conn, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	log := slog.Default().With("cm", "dial", "addr", addr)
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, ioErr(ctx, "dial "+addr, err)
	}
	defer nc.Close()
	stop := watch(ctx, nc)
	defer stop()

	qp, err := opts.createQP()
	if err != nil {
		return nil, err
	}
	c, err := dialExchange(ctx, nc, dev, qp, &opts)
	if err != nil {
		err = errors.Join(err, destroy(qp))
		log.Debug("cm: dial failed", "err", err)
		return nil, err
	}
	log.Debug("cm: connected", "qpn", qp.QPN(), "peer", c.peerAddr, "peer_qpn", c.peerQPN)
	return c, nil
}

// dialExchange runs the dialer's side of REQ / REP / RTU over nc.
func dialExchange(ctx context.Context, nc net.Conn, dev verbs.Device, qp verbs.QP, opts *Options) (*Conn, error) {
	req := message{
		Type:        msgREQ,
		QPN:         qp.QPN(),
		Transport:   dev.Attr().Transport,
		Address:     dev.Address(),
		PrivateData: opts.PrivateData,
	}
	if err := writeMessage(nc, &req); err != nil {
		return nil, ioErr(ctx, "send REQ", err)
	}
	rep, err := readMessage(nc)
	if err != nil {
		if errors.Is(err, ErrProtocol) {
			reject(nc, codeProtocol, err.Error())
			return nil, err
		}
		return nil, ioErr(ctx, "await REP", err)
	}
	switch rep.Type {
	case msgREP:
	case msgREJ:
		return nil, rep.err()
	default:
		err := protoErr("got %v, want REP or REJ", rep.Type)
		reject(nc, codeProtocol, err.Error())
		return nil, err
	}
	if rep.Transport != req.Transport {
		err := fmt.Errorf("cm: listener's device is %q, ours is %q: %w", rep.Transport, req.Transport, verbs.ErrInvalidArg)
		reject(nc, codeFailed, err.Error())
		return nil, err
	}
	if err := opts.connect(qp, rep.Address, rep.QPN); err != nil {
		reject(nc, codeFailed, err.Error())
		return nil, err
	}
	if err := writeMessage(nc, &message{Type: msgRTU}); err != nil {
		return nil, ioErr(ctx, "send RTU", err)
	}
	return &Conn{
		qp:       qp,
		peerAddr: rep.Address,
		peerQPN:  rep.QPN,
		peerData: rep.PrivateData,
		sideAddr: nc.RemoteAddr(),
	}, nil
}

// reject sends a best-effort REJ; errors are ignored because the exchange
// has already failed.
func reject(nc net.Conn, code rejectCode, reason string) {
	_ = writeMessage(nc, &message{Type: msgREJ, Code: code, Reason: truncateReason(reason)})
}
