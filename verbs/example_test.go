package verbs_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"time"

	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

// endpoint is one side of a connection: device, PD, CQ, QP and a region.
type endpoint struct {
	dev verbs.Device
	pd  verbs.PD
	cq  verbs.CQ
	qp  verbs.QP
	mr  verbs.MR
}

func open(uri string) *endpoint {
	dev, err := verbs.Open(uri)
	if err != nil {
		log.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	cq, err := dev.CreateCQ(64)
	if err != nil {
		log.Fatal(err)
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		log.Fatal(err)
	}
	mr, err := pd.AllocMR(4096, verbs.AccessAll)
	if err != nil {
		log.Fatal(err)
	}
	return &endpoint{dev, pd, cq, qp, mr}
}

// connect opens two devices on a loop fabric and connects their QPs. In a
// real program the QP numbers and MR descriptors travel over a side
// channel (package cm).
func connect(fabric string) (client, server *endpoint) {
	client = open("loop://" + fabric + "/client")
	server = open("loop://" + fabric + "/server")
	if err := verbs.ConnectRC(client.qp, verbs.AccessAll, server.dev.Address(), server.qp.QPN()); err != nil {
		log.Fatal(err)
	}
	if err := verbs.ConnectRC(server.qp, verbs.AccessAll, client.dev.Address(), client.qp.QPN()); err != nil {
		log.Fatal(err)
	}
	return client, server
}

func (e *endpoint) close() { e.dev.Close() }

// wait polls one completion, parking when none is ready.
func wait(cq verbs.CQ) verbs.WC {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 1)
	if _, err := verbs.PollWait(ctx, cq, wc, verbs.PollAdaptive); err != nil {
		log.Fatal(err)
	}
	return wc[0]
}

// A one-sided RDMA READ: the client copies bytes out of the server's
// registered memory without the server doing anything.
func Example_read() {
	client, server := connect("example-read")
	defer client.close()
	defer server.close()
	copy(server.mr.Bytes(), "hello from the server's memory")

	err := client.qp.PostSend([]verbs.SendWR{{
		ID:         7,
		Opcode:     verbs.OpRead,
		Flags:      verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: client.mr.Addr(), Length: 30, LKey: client.mr.LKey()}},
		RemoteAddr: server.mr.Addr(),
		RKey:       server.mr.RKey(),
	}})
	if err != nil {
		log.Fatal(err)
	}
	wc := wait(client.cq)
	fmt.Println(wc.ID, wc.Status, wc.Opcode, wc.ByteLen)
	fmt.Println(string(client.mr.Bytes()[:30]))
	// Output:
	// 7 SUCCESS RDMA_READ 30
	// hello from the server's memory
}

// An RDMA WRITE_WITH_IMM: the data lands in the server's memory and the
// immediate value wakes the server through a posted receive.
func Example_writeWithImm() {
	client, server := connect("example-imm")
	defer client.close()
	defer server.close()

	// The server posts a receive; WRITE_WITH_IMM consumes it without
	// touching its buffer.
	if err := server.qp.PostRecv([]verbs.RecvWR{{ID: 100}}); err != nil {
		log.Fatal(err)
	}
	copy(client.mr.Bytes(), "payload")
	err := client.qp.PostSend([]verbs.SendWR{{
		ID:         1,
		Opcode:     verbs.OpWriteWithImm,
		Flags:      verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: client.mr.Addr(), Length: 7, LKey: client.mr.LKey()}},
		RemoteAddr: server.mr.Addr() + 64,
		RKey:       server.mr.RKey(),
		Imm:        0xcafe,
	}})
	if err != nil {
		log.Fatal(err)
	}
	sent := wait(client.cq)
	got := wait(server.cq)
	fmt.Println("client:", sent.Status, sent.Opcode)
	fmt.Printf("server: %v %v wr_id=%d imm=%#x len=%d data=%q\n", got.Status, got.Opcode, got.ID, got.Imm, got.ByteLen, server.mr.Bytes()[64:71])
	// Output:
	// client: SUCCESS RDMA_WRITE
	// server: SUCCESS RECV_RDMA_WITH_IMM wr_id=100 imm=0xcafe len=7 data="payload"
}

// An 8-byte compare-and-swap taking a lock word in the server's memory;
// the original value comes back in the client's buffer.
func Example_compareAndSwap() {
	client, server := connect("example-cas")
	defer client.close()
	defer server.close()

	cas := func(compare, swap uint64) uint64 {
		err := client.qp.PostSend([]verbs.SendWR{{
			Opcode:     verbs.OpAtomicCmpAndSwp,
			Flags:      verbs.FlagSignaled,
			SGL:        []verbs.SGE{{Addr: client.mr.Addr(), Length: 8, LKey: client.mr.LKey()}},
			RemoteAddr: server.mr.Addr(),
			RKey:       server.mr.RKey(),
			Atomic:     verbs.AtomicArgs{Compare: [4]uint64{compare}, Swap: [4]uint64{swap}},
		}})
		if err != nil {
			log.Fatal(err)
		}
		if wc := wait(client.cq); wc.Status != verbs.StatusSuccess {
			log.Fatal(wc.Status)
		}
		return binary.NativeEndian.Uint64(client.mr.Bytes())
	}
	fmt.Println("lock 0→1, saw", cas(0, 1))
	fmt.Println("lock 0→1, saw", cas(0, 1), "(held: no swap)")
	fmt.Println("unlock 1→0, saw", cas(1, 0))
	fmt.Println("lock word now", binary.NativeEndian.Uint64(server.mr.Bytes()))
	// Output:
	// lock 0→1, saw 0
	// lock 0→1, saw 1 (held: no swap)
	// unlock 1→0, saw 1
	// lock word now 0
}

// Fault injection on the loop fabric: a request to a killed node completes
// with RETRY_EXC_ERR and the QP moves to ERROR.
func Example_killedPeer() {
	client, server := connect("example-kill")
	defer client.close()
	defer server.close()
	if err := loop.Get("example-kill").Kill("server"); err != nil {
		log.Fatal(err)
	}
	err := client.qp.PostSend([]verbs.SendWR{{
		Opcode:     verbs.OpRead,
		SGL:        []verbs.SGE{{Addr: client.mr.Addr(), Length: 8, LKey: client.mr.LKey()}},
		RemoteAddr: server.mr.Addr(),
		RKey:       server.mr.RKey(),
	}})
	if err != nil {
		log.Fatal(err)
	}
	wc := wait(client.cq)
	fmt.Println(wc.Status, client.qp.State())
	// Output:
	// RETRY_EXC_ERR ERROR
}

// PRISM's indirect READ: the server keeps a pointer to the current version
// of an object in a slot; one READ through the slot returns the object,
// and a bounded slot ⟨pointer, length⟩ returns only the object's bytes.
func Example_indirectRead() {
	client, server := connect("example-indirect")
	defer client.close()
	defer server.close()

	mem := server.mr.Bytes()
	copy(mem[256:], "version 1")
	copy(mem[512:], "version 2 of the object")
	binary.NativeEndian.PutUint64(mem[0:], server.mr.Addr()+512)  // slot: the current version
	binary.NativeEndian.PutUint64(mem[16:], server.mr.Addr()+512) // bounded slot ⟨pointer,
	binary.NativeEndian.PutUint64(mem[24:], 9)                    //                length⟩

	read := func(slot uint64, flags verbs.SendFlags) string {
		wr := verbs.SendWR{ID: 1, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled | flags,
			SGL:        []verbs.SGE{{Addr: client.mr.Addr(), Length: 64, LKey: client.mr.LKey()}},
			RemoteAddr: server.mr.Addr() + slot, RKey: server.mr.RKey()}
		if err := client.qp.PostSend([]verbs.SendWR{wr}); err != nil {
			log.Fatal(err)
		}
		wc := wait(client.cq)
		if wc.Status != verbs.StatusSuccess {
			log.Fatal(wc.Status)
		}
		return string(client.mr.Bytes()[:wc.ByteLen])
	}
	fmt.Printf("%.23s\n", read(0, verbs.FlagIndirect))
	fmt.Println(read(16, verbs.FlagIndirect|verbs.FlagBounded))
	// Output:
	// version 2 of the object
	// version 2
}
