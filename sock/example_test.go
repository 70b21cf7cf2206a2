package sock_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/rdmakit/rdmakit/sock"
)

// An unmodified net/http server on a sock listener, and a client whose
// only change is its dialer.
func Example() {
	ctx := context.Background()
	ln, err := sock.Listen(ctx, "shm://example-web")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello over remote memory")
	}))
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return sock.Dial(ctx, "shm://example-web")
		},
	}}
	resp, err := client.Get("http://example-web/")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(string(body))
	// Output: hello over remote memory
}

// Dial and Listen speak net.Conn: here an echo over the tcp transport,
// as between two hosts.
func ExampleDial() {
	ctx := context.Background()
	ln, err := sock.Listen(ctx, "tcp://127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo until the client's CloseWrite
	}()
	c, err := sock.Dial(ctx, ln.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.Write([]byte("ping"))
	c.CloseWrite()
	reply, _ := io.ReadAll(c)
	fmt.Println(string(reply), c.LocalAddr().Network())
	// Output: ping sock+tcp
}
