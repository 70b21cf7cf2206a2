package nic

import "testing"

// TestPeerTableDrop: a peer's number lives while a connection holds it,
// and is forgotten after the last Drop.
func TestPeerTableDrop(t *testing.T) {
	var pt PeerTable
	a := pt.Add("shm://a")
	if b := pt.Add("shm://b"); b == a {
		t.Fatalf("two peers share id %d", a)
	}
	if again := pt.Add("shm://a"); again != a {
		t.Fatalf("a second connection of a got id %d, want %d", again, a)
	}
	pt.Drop(a)
	if addr, err := pt.Address(a); err != nil || addr != "shm://a" {
		t.Fatalf("after one of two drops: %q %v", addr, err)
	}
	pt.Drop(a)
	if _, err := pt.Address(a); err == nil {
		t.Fatal("a peer with no connection left still has a number")
	}
	if n := pt.Len(); n != 1 {
		t.Fatalf("table numbers %d peers, want 1", n)
	}
	pt.Drop(12345) // unknown: ignored
}
