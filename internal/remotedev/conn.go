package remotedev

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"io"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// conn is one end of a control connection: gob-encoded messages on a Unix
// stream socket, with file descriptors passed alongside (SCM_RIGHTS).
//
// A message that carries descriptors is written with one sendmsg whose
// ancillary data holds them. The kernel delivers them with the first byte
// of that message and never merges them with another message's, so the
// reader queues descriptors in arrival order and a message that announces
// k of them takes the k oldest.
type conn struct {
	uc *net.UnixConn

	wmu  sync.Mutex
	wbuf bytes.Buffer
	enc  *gob.Encoder

	fr  *fdReader
	dec *gob.Decoder
}

func newConn(uc *net.UnixConn) *conn {
	c := &conn{uc: uc, fr: &fdReader{uc: uc, oob: make([]byte, unix.CmsgSpace(4*64))}}
	c.enc = gob.NewEncoder(&c.wbuf)
	c.dec = gob.NewDecoder(c.fr)
	return c
}

// write sends one message with the given descriptors. It is safe for
// concurrent use; the descriptors stay owned by the caller.
func (c *conn) write(msg any, fds []int) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf.Reset()
	if err := c.enc.Encode(msg); err != nil {
		// The encoder's state is unknown now: the connection is unusable.
		c.uc.Close()
		return fmt.Errorf("remotedev: encode: %w", err)
	}
	b := c.wbuf.Bytes()
	if len(fds) > 0 {
		n, _, err := c.uc.WriteMsgUnix(b, unix.UnixRights(fds...), nil)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	for len(b) > 0 {
		n, err := c.uc.Write(b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// read decodes the next message into msg; the descriptors it announces are
// then taken with c.fr.take. It is for one goroutine only.
func (c *conn) read(msg any) error { return c.dec.Decode(msg) }

// close closes the socket and every received descriptor not yet taken.
// Only the reading goroutine may call it once it stops reading.
func (c *conn) close() {
	c.uc.Close()
	c.fr.closeAll()
}

// fdReader reads the stream and queues the descriptors that come with it.
type fdReader struct {
	uc  *net.UnixConn
	oob []byte
	fds []int
}

// Read implements io.Reader.
func (r *fdReader) Read(p []byte) (int, error) {
	n, oobn, flags, _, err := r.uc.ReadMsgUnix(p, r.oob)
	n, oobn = max(n, 0), max(oobn, 0)
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(r.oob[:oobn])
		if perr != nil {
			return n, fmt.Errorf("remotedev: control message: %w", perr)
		}
		for i := range msgs {
			fds, perr := unix.ParseUnixRights(&msgs[i])
			if perr != nil {
				return n, fmt.Errorf("remotedev: control message: %w", perr)
			}
			r.fds = append(r.fds, fds...)
		}
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return n, fmt.Errorf("remotedev: control message truncated")
	}
	if n == 0 && err == nil && len(p) > 0 {
		return 0, io.EOF
	}
	return n, err
}

// take removes and returns the k oldest received descriptors.
func (r *fdReader) take(k int) ([]int, error) {
	if k > len(r.fds) {
		return nil, fmt.Errorf("remotedev: message announces %d descriptors, %d received", k, len(r.fds))
	}
	fds := append([]int(nil), r.fds[:k]...)
	r.fds = r.fds[k:]
	return fds, nil
}

func (r *fdReader) closeAll() {
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds = nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
