package tcp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-acc
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestQuietConn: a quietConn reads and writes as the net.Conn it wraps
// does: a write larger than the socket buffers completes once the peer
// reads, a read waits for data, the connection's deadline and the peer's
// close end a read, and neither direction allocates.
func TestQuietConn(t *testing.T) {
	a, b := tcpPair(t)
	qa, err := newQuietConn(a)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := newQuietConn(b)
	if err != nil {
		t.Fatal(err)
	}

	// 8 MiB does not fit the socket buffers: Write waits for room.
	msg := make([]byte, 8<<20)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(20 * time.Millisecond) // let the writer fill the buffers first
		buf := make([]byte, len(msg))
		_, err := io.ReadFull(qb, buf)
		if err != nil {
			buf = nil
		}
		got <- buf
	}()
	if n, err := qa.Write(msg); n != len(msg) || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if buf := <-got; !bytes.Equal(buf, msg) {
		t.Fatal("the bytes read differ from the bytes written")
	}

	// A read waits for the data to come.
	go func() {
		time.Sleep(10 * time.Millisecond)
		qb.Write([]byte("hello"))
	}()
	buf := make([]byte, 16)
	if n, err := qa.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}

	// Neither direction allocates.
	one := []byte{1}
	if allocs := testing.AllocsPerRun(100, func() {
		qa.Write(one)
		qb.Read(buf[:1])
	}); allocs != 0 {
		t.Errorf("%v allocations per write and read", allocs)
	}

	// The connection's read deadline ends a read.
	a.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := qa.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	a.SetReadDeadline(time.Time{})

	// The peer's close is the end of the stream.
	b.Close()
	if _, err := qa.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want EOF", err)
	}
}

// TestQuietConnNeedsDescriptor: a connection without a file descriptor
// (a test's wrapper) gets no quietConn, and is used as it is.
func TestQuietConnNeedsDescriptor(t *testing.T) {
	a, _ := net.Pipe()
	defer a.Close()
	if _, err := newQuietConn(a); err == nil {
		t.Fatal("a pipe got a quietConn")
	}
}
