package objstore

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// newTestStore starts a store of mem bytes serving until the test ends.
func newTestStore(t testing.TB, mem int64) *Store {
	t.Helper()
	s, err := NewStore(Config{Mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		s.Close()
	})
	return s
}

// connect connects a client to s, closed when the test ends.
func connect(t testing.TB, s *Store) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCreateSealGet(t *testing.T) {
	s := newTestStore(t, 1<<20)
	c := connect(t, s)
	ctx := context.Background()
	id := NewID()
	buf, err := c.Create(ctx, id, 5, []byte("meta"))
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "hello")
	if err := c.Seal(ctx, id); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, []ID{id}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] == nil || !bytes.Equal(got[0].Data, []byte("hello")) || !bytes.Equal(got[0].Metadata, []byte("meta")) {
		t.Fatalf("Get = %+v", got[0])
	}
	if _, err := c.Create(ctx, id, 1, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate Create: %v, want ErrExists", err)
	}
}
