package objexp

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/peers"
	"github.com/rdmakit/rdmakit/bench/stats"
	"github.com/rdmakit/rdmakit/objstore/object"
)

// errNoRedis is a run without redis-server.
var errNoRedis = peers.ErrNotInstalled

// redis runs the Redis rows: redis-server started here, each size's pool
// SET, then GETs in random order after warm-ups checked by CRC.
func (u *fetchRun) redis(ctx context.Context) error {
	srv, err := peers.StartRedis(ctx)
	if err != nil {
		return fmt.Errorf("objexp: %w", err)
	}
	defer srv.Stop()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	defer rc.Close()
	lat := stats.NewLatencies(u.plan.fetches)
	for _, size := range u.plan.sizes {
		n := u.plan.poolSize(size)
		u.pools[size] = n
		keys := make([]string, n)
		sums := make(map[string]uint32, n)
		val := make([]byte, size)
		for i := range keys {
			id := object.NewID()
			fill(val, id)
			keys[i], sums[id.String()] = id.String(), crc32.ChecksumIEEE(val)
			if err := rc.Set(ctx, keys[i], val, 0).Err(); err != nil {
				return fmt.Errorf("objexp: redis SET %s: %w", sizeLabel(size), err)
			}
		}
		for range u.plan.rounds {
			s, err := u.measureRedis(ctx, rc, srv.Pid(), keys, sums, size, lat)
			if err != nil {
				return fmt.Errorf("objexp: redis, %s: %w", sizeLabel(size), err)
			}
			u.add(sysRedis, size, s)
		}
		if err := rc.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("objexp: redis FLUSHALL: %w", err)
		}
	}
	return nil
}

// measureRedis is one round of GETs of one size.
func (u *fetchRun) measureRedis(ctx context.Context, rc *redis.Client, pid int, keys []string, sums map[string]uint32, size int, lat *stats.Latencies) (fetchSample, error) {
	rng := rand.New(rand.NewPCG(uint64(size), uint64(len(keys))+1))
	for range u.plan.warmup {
		k := keys[rng.IntN(len(keys))]
		b, err := rc.Get(ctx, k).Bytes()
		if err != nil {
			return fetchSample{}, err
		}
		if len(b) != size || crc32.ChecksumIEEE(b) != sums[k] {
			return fetchSample{}, errors.New("GET returned other bytes than were SET")
		}
	}
	perm := rng.Perm(len(keys))
	cpu0, err := bench.ProcCPU(pid)
	if err != nil {
		return fetchSample{}, err
	}
	lat.Reset()
	var total time.Duration
	count := u.plan.count(size)
	for i := range count {
		k := keys[perm[i%len(perm)]]
		t0 := time.Now()
		b, err := rc.Get(ctx, k).Bytes()
		d := time.Since(t0)
		if err != nil {
			return fetchSample{}, err
		}
		if len(b) != size {
			return fetchSample{}, fmt.Errorf("GET returned %d bytes, want %d", len(b), size)
		}
		lat.Record(d)
		total += d
	}
	cpu1, err := bench.ProcCPU(pid)
	if err != nil {
		return fetchSample{}, err
	}
	n := float64(count)
	s := lat.Summary()
	return fetchSample{mean: us(s.Avg), p50: us(s.P50), fetches: count,
		gbps: float64(size) * n / total.Seconds() / 1e9, copied: math.NaN(), cpu: us(cpu1-cpu0) / n}, nil
}
