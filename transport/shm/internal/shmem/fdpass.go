package shmem

import (
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// MaxFDs is the most descriptors one SendFDs call may carry: the kernel's
// SCM_MAX_FD.
const MaxFDs = 253

// SendFDs writes payload to conn with the descriptors fds attached as
// SCM_RIGHTS ancillary data. The payload must not be empty (a stream
// socket carries ancillary data only with at least one byte of data); the
// descriptors travel with its first byte. The caller keeps its fds: the
// receiver gets duplicates.
func SendFDs(conn *net.UnixConn, payload []byte, fds ...int) error {
	if conn == nil {
		return errors.New("shmem: send fds: nil connection")
	}
	if len(payload) == 0 {
		return errors.New("shmem: send fds: empty payload")
	}
	if len(fds) > MaxFDs {
		return fmt.Errorf("shmem: send fds: %d descriptors, at most %d", len(fds), MaxFDs)
	}
	for _, fd := range fds {
		if fd < 0 {
			return fmt.Errorf("shmem: send fds: bad descriptor %d", fd)
		}
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, oobn, err := conn.WriteMsgUnix(payload, oob, nil)
	if err != nil {
		return fmt.Errorf("shmem: send fds: %w", err)
	}
	if oobn != len(oob) {
		return fmt.Errorf("shmem: send fds: sent %d of %d control bytes", oobn, len(oob))
	}
	if n < len(payload) {
		// A stream socket may take part of the payload; the descriptors
		// went with the first byte, the rest follows as plain data.
		if _, err := conn.Write(payload[n:]); err != nil {
			return fmt.Errorf("shmem: send fds: %w", err)
		}
	}
	return nil
}

// RecvFDs reads one message from conn into payload and returns the number
// of payload bytes and the descriptors that came with them, at most
// maxFDs. The descriptors are close-on-exec and owned by the caller. On
// any error every descriptor received by this call is closed and fds is
// nil; more descriptors than maxFDs, or ancillary data truncated by the
// kernel, are errors. A connection closed by the peer gives io.EOF.
//
// On a stream socket one read may return fewer bytes than the peer sent
// with its SendFDs; the descriptors arrive with the first byte, so read
// the rest of a fixed-size message with plain reads.
func RecvFDs(conn *net.UnixConn, payload []byte, maxFDs int) (n int, fds []int, err error) {
	if conn == nil {
		return 0, nil, errors.New("shmem: recv fds: nil connection")
	}
	if len(payload) == 0 {
		return 0, nil, errors.New("shmem: recv fds: empty payload buffer")
	}
	if maxFDs < 0 || maxFDs > MaxFDs {
		return 0, nil, fmt.Errorf("shmem: recv fds: maxFDs %d out of range [0, %d]", maxFDs, MaxFDs)
	}
	var oob []byte
	if maxFDs > 0 {
		oob = make([]byte, unix.CmsgSpace(4*maxFDs))
	}
	n, oobn, flags, _, rerr := conn.ReadMsgUnix(payload, oob)
	// Collect whatever arrived before judging the read, so that nothing
	// leaks on an error path.
	fds, perr := parseRights(oob[:oobn])
	fail := func(err error) (int, []int, error) {
		closeAll(fds)
		return 0, nil, err
	}
	switch {
	case rerr != nil:
		return fail(fmt.Errorf("shmem: recv fds: %w", rerr))
	case perr != nil:
		return fail(fmt.Errorf("shmem: recv fds: %w", perr))
	case flags&unix.MSG_CTRUNC != 0:
		return fail(fmt.Errorf("shmem: recv fds: ancillary data truncated (more than %d descriptors sent)", maxFDs))
	case len(fds) > maxFDs:
		return fail(fmt.Errorf("shmem: recv fds: %d descriptors, at most %d expected", len(fds), maxFDs))
	case n == 0:
		return fail(io.EOF)
	}
	if len(fds) == 0 {
		fds = nil
	}
	return n, fds, nil
}

// parseRights returns the descriptors in SCM_RIGHTS messages of oob. On a
// malformed message it still returns those parsed so far, for closing.
func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	var firstErr error
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		fds = append(fds, got...)
	}
	return fds, firstErr
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
