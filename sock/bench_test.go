package sock

import (
	"fmt"
	"io"
	"net"
	"testing"
)

func benchPingPong(b *testing.B, c1, c2 net.Conn, size int) {
	go func() {
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c2, buf); err != nil {
				return
			}
			if _, err := c2.Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c1.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c1, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func benchStream(b *testing.B, c1, c2 net.Conn, size int) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 256<<10)
		n := int64(0)
		for n < int64(b.N)*int64(size) {
			k, err := c2.Read(buf)
			if err != nil {
				return
			}
			n += int64(k)
		}
	}()
	buf := make([]byte, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c1.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	<-done
}

func tcpPair(b *testing.B) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	c1, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	return c1, <-ch
}

func BenchmarkPingPong64(b *testing.B) {
	b.Run("sock-shm", func(b *testing.B) {
		c1, c2, done := pipe(b, Config{}, "shm")
		defer done()
		defer c1.Close()
		defer c2.Close()
		benchPingPong(b, c1, c2, 64)
	})
	b.Run("sock-tcp", func(b *testing.B) {
		c1, c2, done := pipe(b, Config{}, "tcp")
		defer done()
		defer c1.Close()
		defer c2.Close()
		benchPingPong(b, c1, c2, 64)
	})
	b.Run("net-tcp", func(b *testing.B) {
		c1, c2 := tcpPair(b)
		defer c1.Close()
		defer c2.Close()
		benchPingPong(b, c1, c2, 64)
	})
}

func BenchmarkStream64K(b *testing.B) {
	b.Run("sock-shm", func(b *testing.B) {
		c1, c2, done := pipe(b, Config{}, "shm")
		defer done()
		defer c1.Close()
		defer c2.Close()
		benchStream(b, c1, c2, 64<<10)
	})
	b.Run("net-tcp", func(b *testing.B) {
		c1, c2 := tcpPair(b)
		defer c1.Close()
		defer c2.Close()
		benchStream(b, c1, c2, 64<<10)
	})
}

func BenchmarkPingPongModes(b *testing.B) {
	for _, mode := range []Mode{Direct, SP2C, SPSC} {
		b.Run(mode.String(), func(b *testing.B) {
			c1, c2, done := pipe(b, Config{Mode: mode}, "shm")
			defer done()
			defer c1.Close()
			defer c2.Close()
			benchPingPong(b, c1, c2, 64)
		})
	}
}

func BenchmarkStreamConfigs(b *testing.B) {
	for _, cfg := range []Config{
		{},
		{RingSize: 1 << 20, ReadBuffer: 256 << 10},
		{RingSize: 512 << 10, ReadBuffer: 256 << 10},
		{RingSize: 512 << 10, ReadBuffer: 128 << 10},
		{RingSize: 1 << 20, ReadBuffer: 256 << 10, MTU: 64 << 10},
		{RingSize: 256 << 10, ReadBuffer: 128 << 10, MTU: 32 << 10},
	} {
		b.Run(fmt.Sprintf("ring%dK-rcv%dK-mtu%dK", cfg.RingSize>>10, cfg.ReadBuffer>>10, cfg.MTU>>10), func(b *testing.B) {
			c1, c2, done := pipe(b, cfg, "shm")
			defer done()
			defer c1.Close()
			defer c2.Close()
			benchStream(b, c1, c2, 64<<10)
		})
	}
}

func BenchmarkStreamModes(b *testing.B) {
	for _, mode := range []Mode{Direct, SP2C, SPSC} {
		b.Run(mode.String(), func(b *testing.B) {
			c1, c2, done := pipe(b, Config{Mode: mode}, "shm")
			defer done()
			defer c1.Close()
			defer c2.Close()
			benchStream(b, c1, c2, 64<<10)
		})
	}
}
