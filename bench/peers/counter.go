package peers

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a peer server process listening on Addr.
type Server struct {
	Addr string
	p    *proc
}

// Stop kills the server.
func (s *Server) Stop() { s.p.stop() }

// Pid is the server's process id (its CPU time is in /proc/PID/stat).
func (s *Server) Pid() int { return s.p.cmd.Process.Pid }

// StartRedis starts redis-server on a free loopback port, without
// persistence.
func StartRedis(ctx context.Context) (*Server, error) {
	bin, err := lookPath("redis-server", "redis")
	if err != nil {
		return nil, err
	}
	p, port, err := startServer(ctx, bin, func(port int) []string {
		return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	return &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), p: p}, nil
}

// StartMemcached starts memcached on a free loopback port (TCP only,
// its default worker threads: four).
func StartMemcached(ctx context.Context) (*Server, error) { return StartMemcachedThreads(ctx, 0) }

// StartMemcachedThreads is StartMemcached with threads worker threads
// (-t); 0 keeps memcached's default.
func StartMemcachedThreads(ctx context.Context, threads int) (*Server, error) {
	bin, err := lookPath("memcached", "memcached")
	if err != nil {
		return nil, err
	}
	p, port, err := startServer(ctx, bin, func(port int) []string {
		args := []string{"-p", strconv.Itoa(port), "-U", "0", "-l", "127.0.0.1", "-u", "root"}
		if threads > 0 {
			args = append(args, "-t", strconv.Itoa(threads))
		}
		return args
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("memcached: %w", err)
	}
	return &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), p: p}, nil
}

// CounterResult is a counter load's outcome.
type CounterResult struct {
	Ops     int64         // increments answered
	Elapsed time.Duration // measured time
}

// Rate is increments per second, in millions.
func (r CounterResult) Rate() float64 { return float64(r.Ops) / r.Elapsed.Seconds() / 1e6 }

// RedisIncr runs conns connections for d, each keeping pipeline INCR
// commands of one key in flight, and checks every answer is an integer.
func RedisIncr(ctx context.Context, addr string, conns, pipeline int, d time.Duration) (CounterResult, error) {
	cmd := []byte("*2\r\n$4\r\nINCR\r\n$11\r\nrdmakit-seq\r\n")
	return counterLoad(ctx, addr, conns, pipeline, d, nil, cmd, func(line []byte) error {
		if len(line) < 2 || line[0] != ':' {
			return fmt.Errorf("redis answered %q", line)
		}
		return nil
	})
}

// MemcachedIncr is RedisIncr for memcached's incr (the key is set to 0
// first).
func MemcachedIncr(ctx context.Context, addr string, conns, pipeline int, d time.Duration) (CounterResult, error) {
	set := []byte("set rdmakit-seq 0 0 1\r\n0\r\n")
	cmd := []byte("incr rdmakit-seq 1\r\n")
	return counterLoad(ctx, addr, conns, pipeline, d, set, cmd, func(line []byte) error {
		if _, err := strconv.ParseUint(string(line), 10, 64); err != nil {
			return fmt.Errorf("memcached answered %q", line)
		}
		return nil
	})
}

// counterLoad drives a line protocol: every command gets one line back.
func counterLoad(ctx context.Context, addr string, conns, pipeline int, d time.Duration, setup, cmd []byte, check func([]byte) error) (CounterResult, error) {
	if setup != nil {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return CounterResult{}, err
		}
		_, _ = c.Write(setup)
		line, err := bufio.NewReader(c).ReadBytes('\n')
		c.Close()
		if err != nil || !bytes.HasPrefix(line, []byte("STORED")) {
			return CounterResult{}, fmt.Errorf("setup answered %q, %v", line, err)
		}
	}
	batch := bytes.Repeat(cmd, pipeline)
	var ops atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	start := time.Now()
	deadline := start.Add(d)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			r := bufio.NewReaderSize(c, 64<<10)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, err := c.Write(batch); err != nil {
					errs <- err
					return
				}
				for k := 0; k < pipeline; k++ {
					line, err := r.ReadSlice('\n')
					if err != nil {
						errs <- err
						return
					}
					if err := check(bytes.TrimRight(line, "\r\n")); err != nil {
						errs <- err
						return
					}
				}
				ops.Add(int64(pipeline))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return CounterResult{}, err
	}
	return CounterResult{Ops: ops.Load(), Elapsed: elapsed}, nil
}
