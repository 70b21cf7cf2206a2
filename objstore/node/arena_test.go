package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/objstore/transfer"
	"github.com/rdmakit/rdmakit/verbs"
)

func openDev(t *testing.T, uri string) verbs.Device {
	t.Helper()
	dev, err := verbs.Open(uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// TestRegisterMode: by default a device that registers memory in place
// (tcp) registers objects and one that cannot (shm) registers the arena;
// an explicit mode stays; an unknown one is refused.
func TestRegisterMode(t *testing.T) {
	tcp := openDev(t, "tcp://127.0.0.1:0")
	shm := openDev(t, fmt.Sprintf("shm://objstore-mode-%d", os.Getpid()))
	for _, c := range []struct {
		dev        verbs.Device
		mode, want string
	}{
		{tcp, "", RegisterObject},
		{shm, "", RegisterArena},
		{tcp, RegisterArena, RegisterArena},
		{shm, RegisterObject, RegisterObject},
	} {
		if got, err := registerMode(c.mode, c.dev); err != nil || got != c.want {
			t.Errorf("%s, %q: %q %v, want %q", c.dev.Address(), c.mode, got, err, c.want)
		}
	}
	if _, err := registerMode("pages", tcp); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Errorf("an unknown mode: %v, want ErrInvalidArg", err)
	}
}

// TestArenaNeedsMemfd: a device whose regions are anonymous memory cannot
// hold a store's arena (its clients map the memfd).
func TestArenaNeedsMemfd(t *testing.T) {
	if _, err := allocArena(openDev(t, "tcp://127.0.0.1:0"), 1<<20); !errors.Is(err, ErrNoArena) {
		t.Fatalf("arena on anonymous regions: %v, want ErrNoArena", err)
	}
	a, err := allocArena(openDev(t, "tcp://127.0.0.1:0?memfd=1"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var c transfer.Config
	a.configure(&c)
	if a.fd < 0 || len(a.memory().Bytes) != 1<<20 || c.Arena != a.mr || c.ArenaPD != a.pd {
		t.Fatalf("arena %+v, transfer config %+v", a, c)
	}
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
}

// TestArenaGivesMemoryBack: a store in an arena allocated by the shm
// device (a memfd sealed against shrinking and growing) still punches
// its freed pages out: resident memory falls after a delete, and the
// pages read as zeros.
func TestArenaGivesMemoryBack(t *testing.T) {
	const mem, size = 32 << 20, 8 << 20
	a, err := allocArena(openDev(t, fmt.Sprintf("shm://objstore-punch-%d", os.Getpid())), mem)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	st, err := objstore.NewStore(objstore.Config{Mem: mem, Memory: a.memory(), KeepResident: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- st.Serve(ctx) }()
	defer func() {
		st.Close()
		<-done
	}()
	c, err := objstore.Connect(ctx, st.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := object.NewID()
	b, err := c.Create(ctx, id, size, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0xa5
	}
	if err := c.Seal(ctx, id); err != nil {
		t.Fatal(err)
	}
	full := st.Stats().ResidentBytes
	if full < size {
		t.Fatalf("resident %d bytes with an object of %d", full, size)
	}
	if err := c.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if after := st.Stats().ResidentBytes; after > full-size/2 {
		t.Fatalf("resident %d bytes after the delete, %d before: the pages were not given back", after, full)
	}
	if bytes.IndexByte(a.mr.Bytes()[:size], 0xa5) >= 0 {
		t.Fatal("the deleted object's pages still hold its bytes")
	}
}
