package nic_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestRegMRInPlace registers a slice of Go memory at the peer and READs
// and WRITEs it remotely; after Deregister the rkey fails with
// REM_ACCESS_ERR and the slice is left as it was.
func TestRegMRInPlace(t *testing.T) {
	p := newPair(t)
	buf := make([]byte, 10000)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	mr, err := p.peerPD.(verbs.MemRegistrar).RegMR(buf[1000:9000], verbs.AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	if &mr.Bytes()[0] != &buf[1000] || mr.Len() != 8000 {
		t.Fatalf("RegMR's Bytes is not the registered slice")
	}
	wc := make([]verbs.WC, 4)
	post := func(op verbs.Opcode, off uint64, n uint32) verbs.Status {
		t.Helper()
		if err := p.qp.PostSend([]verbs.SendWR{{
			ID: 1, Opcode: op, Flags: verbs.FlagSignaled,
			SGL:        []verbs.SGE{{Addr: p.local.Addr(), Length: n, LKey: p.local.LKey()}},
			RemoteAddr: mr.Addr() + off, RKey: mr.RKey(),
		}}); err != nil {
			t.Fatal(err)
		}
		got, err := p.cq.Poll(wc)
		if got != 1 || err != nil {
			t.Fatalf("poll: %d %v", got, err)
		}
		return wc[0].Status
	}
	if st := post(verbs.OpRead, 100, 64); st != verbs.StatusSuccess {
		t.Fatalf("READ: %v", st)
	}
	if !bytes.Equal(p.local.Bytes()[:64], buf[1100:1164]) {
		t.Fatal("READ returned other bytes than the registered slice holds")
	}
	copy(p.local.Bytes(), "written remotely")
	if st := post(verbs.OpWrite, 0, 16); st != verbs.StatusSuccess {
		t.Fatalf("WRITE: %v", st)
	}
	if string(buf[1000:1016]) != "written remotely" {
		t.Fatalf("WRITE did not land in the slice: %q", buf[1000:1016])
	}
	if st := post(verbs.OpRead, 7990, 64); st != verbs.StatusRemAccessErr {
		t.Fatalf("READ past the registered slice: %v, want REM_ACCESS_ERR", st)
	}

	// A new QP: the out-of-bounds READ moved the first to ERROR.
	p2 := newPair(t)
	mr2, err := p2.peerPD.(verbs.MemRegistrar).RegMR(buf, verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	before := bytes.Clone(buf)
	if err := mr2.Deregister(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, before) {
		t.Fatal("Deregister changed the application's memory")
	}
	if err := p2.qp.PostSend([]verbs.SendWR{{
		ID: 2, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: p2.local.Addr(), Length: 8, LKey: p2.local.LKey()}},
		RemoteAddr: uint64(mr2.Addr()), RKey: mr2.RKey(),
	}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := p2.cq.Poll(wc); n != 1 || wc[0].Status != verbs.StatusRemAccessErr {
		t.Fatalf("READ after Deregister: n=%d %v, want REM_ACCESS_ERR", n, wc[0].Status)
	}
	buf[0]++ // still the application's, still mapped
	if err := mr.Deregister(); err != nil {
		t.Fatal(err)
	}
	if err := mr.Deregister(); !errors.Is(err, verbs.ErrInvalidState) {
		t.Fatalf("second Deregister: %v, want ErrInvalidState", err)
	}
	// The PD counts registered regions: with the pair's own MR gone too,
	// only its QP keeps it busy.
	if err := p.peer.Deregister(); err != nil {
		t.Fatal(err)
	}
	if err := p.peerPD.Dealloc(); err == nil || !strings.Contains(err.Error(), " 0 MRs") {
		t.Fatalf("Dealloc after every region was deregistered: %v, want busy with 0 MRs", err)
	}
}

// TestRegMRRefusals: empty buffers, bad access flags and memfd-backed
// nodes are refused with typed errors.
func TestRegMRRefusals(t *testing.T) {
	p := newPair(t)
	r := p.pd.(verbs.MemRegistrar)
	if _, err := r.RegMR(nil, verbs.AccessRemoteRead); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Errorf("empty buffer: %v, want ErrInvalidArg", err)
	}
	if _, err := r.RegMR(make([]byte, 8), verbs.AccessRemoteWrite); !errors.Is(err, verbs.ErrAccess) {
		t.Errorf("remote write without local write: %v, want ErrAccess", err)
	}
	n := nic.NewNode(nic.Config{Address: "memfd-node", Transport: "test", MemFD: true})
	defer n.Close()
	pd, err := n.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.(verbs.MemRegistrar).RegMR(make([]byte, 8), verbs.AccessRemoteRead); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("memfd node: %v, want ErrNotSupported", err)
	}
}
