package shm_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs"
)

// A departer is a child process that plays a node's client several times
// over, one shm device after another, and leaves in the way its parent
// says: its device closes, the process exits, or it is killed. Its
// commands, one a line on stdin:
//
//	conn ADDR QPN   open a device, connect a QP to the node's QP QPN at
//	                ADDR; answers "qp ADDR QPN MRADDR RKEY"
//	go ADDR RKEY    WRITE, READ and FAA on the node's memory at ADDR, then
//	                a SEND; answers "done"
//	close           close the device; answers "closed"
//	exit            exit at once (the device still open)
//	hold            give duplicates of the device's control sockets to a
//	                grandchild that sleeps; answers "held PID"
func init() {
	remotedev.Role("departer", runDeparter)
	remotedev.Role("sleeper", func(string) int { time.Sleep(time.Minute); return 0 })
}

func runDeparter(string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "departer:", err)
		return 1
	}
	in := bufio.NewScanner(os.Stdin)
	var e *endpoint
	for k := 0; in.Scan(); k++ {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "conn":
			var err error
			if e, err = newEndpoint(fmt.Sprintf("departer-%d-%d", os.Getpid(), k), 4096); err != nil {
				return fail(err)
			}
			qpn, _ := strconv.ParseUint(f[2], 10, 32)
			if err := e.connect(f[1], uint32(qpn)); err != nil {
				return fail(err)
			}
			fmt.Printf("qp %s %d %#x %#x\n", e.dev.Address(), e.qp.QPN(), e.mr.Addr(), e.mr.RKey())
		case "go":
			addr, _ := strconv.ParseUint(f[1], 0, 64)
			rkey, _ := strconv.ParseUint(f[2], 0, 32)
			for _, wr := range []verbs.SendWR{
				{Opcode: verbs.OpWrite, SGL: e.local(0, 8), RemoteAddr: addr, RKey: uint32(rkey)},
				{Opcode: verbs.OpRead, SGL: e.local(8, 8), RemoteAddr: addr, RKey: uint32(rkey)},
				{Opcode: verbs.OpAtomicFetchAndAdd, SGL: e.local(16, 8), RemoteAddr: addr, RKey: uint32(rkey), Atomic: verbs.AtomicArgs{Swap: [4]uint64{1}}},
				{Opcode: verbs.OpSend, SGL: e.local(0, 8)},
			} {
				if wc, err := e.run(wr); err != nil || wc.Status != verbs.StatusSuccess {
					return fail(fmt.Errorf("%v: %v %v", wr.Opcode, wc.Status, err))
				}
			}
			fmt.Println("done")
		case "close":
			if err := e.dev.Close(); err != nil {
				return fail(err)
			}
			fmt.Println("closed")
		case "exit":
			os.Exit(0)
		case "hold":
			files, err := shm.ControlFiles(e.dev)
			if err != nil {
				return fail(err)
			}
			cmd, err := remotedev.Command("sleeper", "")
			if err != nil {
				return fail(err)
			}
			cmd.ExtraFiles = files
			if err := cmd.Start(); err != nil {
				return fail(err)
			}
			fmt.Println("held", cmd.Process.Pid)
		default:
			return fail(fmt.Errorf("command %q", f[0]))
		}
	}
	return 0
}

// run posts one signaled work request and waits for its completion.
func (e *endpoint) run(wr verbs.SendWR) (verbs.WC, error) {
	return postWait(e.qp, e.cq, wr)
}

// postWait posts one signaled work request on qp and waits (10 s at most)
// for its completion on cq, skipping receive completions.
func postWait(qp verbs.QP, cq verbs.CQ, wr verbs.SendWR) (verbs.WC, error) {
	wr.Flags |= verbs.FlagSignaled
	if err := qp.PostSend([]verbs.SendWR{wr}); err != nil {
		return verbs.WC{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 1)
	for {
		n, err := verbs.PollWait(ctx, cq, wc, verbs.PollAdaptive)
		if err != nil {
			return verbs.WC{}, fmt.Errorf("%v: %w", wr.Opcode, err)
		}
		if n == 1 && wc[0].Opcode != verbs.WCRecv {
			return wc[0], nil
		}
	}
}

// departerProc is a running departer, driven from a test goroutine (so
// its methods return errors instead of failing the test).
type departerProc struct{ *remotedev.Child }

func startDeparter() (*departerProc, error) {
	c, err := remotedev.StartChild("departer", "")
	if err != nil {
		return nil, err
	}
	return &departerProc{c}, nil
}

// say sends a command and returns the fields of the answer, which must
// start with want.
func (p *departerProc) say(cmd, want string) ([]string, error) {
	return p.Ask(cmd, want)
}

// end stops the process: exit or kill.
func (p *departerProc) end(how string) error {
	if how == "exit" {
		if err := p.Say("exit"); err != nil {
			return err
		}
		return p.Wait(20 * time.Second)
	}
	return p.Kill(20 * time.Second)
}

// serveClient plays the node for one client of p: it creates a QP and a
// CQ, connects them to a fresh device of p and has p use them (one-sided
// operations both ways and a SEND). It returns the QP and CQ, for the
// caller to probe and free after the client left.
func serveClient(node *endpoint, p *departerProc, slot uint64) (verbs.QP, verbs.CQ, error) {
	cq, err := node.dev.CreateCQ(64)
	if err != nil {
		return nil, nil, err
	}
	qp, err := node.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16}})
	if err != nil {
		cq.Destroy()
		return nil, nil, err
	}
	err = func() error {
		f, err := p.say(fmt.Sprintf("conn %s %d", node.dev.Address(), qp.QPN()), "qp")
		if err != nil {
			return err
		}
		qpn, _ := strconv.ParseUint(f[1], 10, 32)
		addr, _ := strconv.ParseUint(f[2], 0, 64)
		rkey, _ := strconv.ParseUint(f[3], 0, 32)
		if err := verbs.ConnectRC(qp, verbs.AccessAll, f[0], uint32(qpn)); err != nil {
			return err
		}
		if err := qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: node.local(slot+8, 8)}}); err != nil {
			return err
		}
		if wc, err := postWait(qp, cq, verbs.SendWR{Opcode: verbs.OpRead, SGL: node.local(slot+16, 8), RemoteAddr: addr, RKey: uint32(rkey)}); err != nil || wc.Status != verbs.StatusSuccess {
			return fmt.Errorf("node's READ of the client: %v %v", wc.Status, err)
		}
		if _, err := p.say(fmt.Sprintf("go %#x %#x", node.mr.Addr()+slot, node.mr.RKey()), "done"); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		wc := make([]verbs.WC, 1)
		if n, err := verbs.PollWait(ctx, cq, wc, verbs.PollAdaptive); err != nil || n != 1 || wc[0].Status != verbs.StatusSuccess || wc[0].Opcode != verbs.WCRecv {
			return fmt.Errorf("the client's SEND: %+v %v", wc[0], err)
		}
		return nil
	}()
	if err != nil {
		qp.Destroy()
		cq.Destroy()
		return nil, nil, err
	}
	return qp, cq, nil
}

// probe is the memory node's liveness probe, a signaled 0-byte READ; it
// returns the completion status.
func probe(qp verbs.QP, cq verbs.CQ) (verbs.Status, error) {
	wc, err := postWait(qp, cq, verbs.SendWR{ID: 99, Opcode: verbs.OpRead})
	return wc.Status, err
}

// footprint is what a process holds: descriptors, mappings, and the
// mappings of files (every segment and region of the transport is a memfd
// mapping, so it counts among them).
type footprint struct{ fds, maps, fileMaps int }

func measure(t *testing.T) footprint {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps:", err)
	}
	lines := strings.Split(strings.TrimSpace(string(maps)), "\n")
	f := footprint{fds: len(fds), maps: len(lines)}
	for _, l := range lines {
		// address perms offset dev inode [path]: a path that is not a
		// pseudo-name like [heap] or [stack] is a file.
		if fs := strings.Fields(l); len(fs) > 5 && !strings.HasPrefix(fs[5], "[") {
			f.fileMaps++
		}
	}
	return f
}

// anonSlack is how many more mappings than at the start the process may
// have after the departures, all anonymous: the Go runtime starts threads
// (a stack and its guard page each, and a C malloc arena) and grows its
// heap as the test runs. Mappings of files, the transport's memfds among
// them, and descriptors must come back exactly. Under the race detector
// every thread and goroutine also has the detector's own state (more
// anonymous mappings, raceSlack); the exact checks are the same.
const anonSlack = 48 + raceSlack

// TestDepartedPeersFreed serves clients from many child processes that
// leave in turn, each way a client leaves (its device closes, its process
// exits, its process is killed), several lanes in parallel: after every
// departure the node's liveness probe fails, and once the node freed its
// QPs and CQs the process holds the descriptors and mappings it held at
// the start and the device has no connection left.
func TestDepartedPeersFreed(t *testing.T) {
	departures := 100
	if testing.Short() {
		departures = 24
	}
	const lanes, perProc = 4, 2 // each process: closes its device once, then exits or is killed
	node := mustEndpoint(t, 1<<16)
	conns := shm.Connections(node.dev)

	// lane serves procs processes one after another; their last
	// departure alternates between exit and kill.
	lane := func(i, procs int) error {
		for k := 0; k < procs; k++ {
			p, err := startDeparter()
			if err != nil {
				return err
			}
			for r := 0; r < perProc; r++ {
				qp, cq, err := serveClient(node, p, uint64(i)*64)
				if err != nil {
					p.end("kill")
					return err
				}
				how := "close"
				switch {
				case r < perProc-1:
					_, err = p.say("close", "closed")
				case k%2 == 0:
					how = "kill"
					err = p.end(how)
				default:
					how = "exit"
					err = p.end(how)
				}
				if err != nil {
					p.end("kill")
					return err
				}
				st, err := probe(qp, cq)
				if err != nil || st != verbs.StatusRetryExcErr {
					p.end("kill")
					return fmt.Errorf("probe of a client gone by %s: %v %v, want RETRY_EXC_ERR", how, st, err)
				}
				qp.Destroy()
				cq.Destroy()
			}
		}
		return nil
	}
	// One process first, so that whatever the first departures create once
	// (runtime threads, heap) is there before the count starts.
	if err := lane(0, 1); err != nil {
		t.Fatal(err)
	}
	waitConns(t, node.dev, conns)
	start := measure(t)

	procs := departures / perProc
	var wg sync.WaitGroup
	errs := make(chan error, lanes)
	for i := 0; i < lanes; i++ {
		n := procs / lanes
		if i < procs%lanes {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- lane(i, n)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	waitConns(t, node.dev, conns)
	var end footprint
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		end = measure(t)
		if end.fds <= start.fds && end.fileMaps <= start.fileMaps || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d departures: fds %d → %d, mappings %d → %d (of files %d → %d)", procs*perProc, start.fds, end.fds, start.maps, end.maps, start.fileMaps, end.fileMaps)
	if end.fds > start.fds || end.fileMaps > start.fileMaps || end.maps > start.maps+anonSlack {
		t.Errorf("departed peers were not freed: descriptors %d → %d, mappings of files %d → %d, mappings %d → %d (slack %d)",
			start.fds, end.fds, start.fileMaps, end.fileMaps, start.maps, end.maps, anonSlack)
	}
}

// waitConns waits until dev has want connections.
func waitConns(t *testing.T, dev verbs.Device, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); shm.Connections(dev) != want || shm.Peers(dev) != want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("device has %d connections and numbers %d peers, want %d: departed peers are still connected",
				shm.Connections(dev), shm.Peers(dev), want)
		}
	}
}

// TestDeadPeerWithHeldSocket kills a client whose control sockets a
// grandchild still holds, so they never close: the device notices the
// death by the client's process identity, frees the connections, and the
// liveness probe fails.
func TestDeadPeerWithHeldSocket(t *testing.T) {
	node := mustEndpoint(t, 4096)
	conns := shm.Connections(node.dev)
	p, err := startDeparter()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.end("kill") })
	qp, cq, err := serveClient(node, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := p.say("hold", "held")
	if err != nil {
		t.Fatal(err)
	}
	gpid, _ := strconv.Atoi(f[0])
	t.Cleanup(func() {
		_ = syscall.Kill(gpid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(gpid, &ws, 0, nil) // reaped by init when it is not ours; harmless
	})
	if err := p.end("kill"); err != nil {
		t.Fatal(err)
	}
	waitConns(t, node.dev, conns)
	if st, err := probe(qp, cq); err != nil || st != verbs.StatusRetryExcErr {
		t.Fatalf("probe of a dead client: %v %v, want RETRY_EXC_ERR", st, err)
	}
}

// TestProbeDeadPeer posts the liveness probe (a 0-byte READ) on an idle
// QP whose peer process was killed: it fails with RETRY_EXC_ERR, as a
// request to an unreachable peer does, and the QP goes to ERROR.
func TestProbeDeadPeer(t *testing.T) {
	node := mustEndpoint(t, 4096)
	p, err := startDeparter()
	if err != nil {
		t.Fatal(err)
	}
	qp, cq, err := serveClient(node, p, 0)
	if err != nil {
		p.end("kill")
		t.Fatal(err)
	}
	if st, err := probe(qp, cq); err != nil || st != verbs.StatusSuccess {
		t.Fatalf("probe of a live client: %v %v", st, err)
	}
	if err := p.end("kill"); err != nil {
		t.Fatal(err)
	}
	if st, err := probe(qp, cq); err != nil || st != verbs.StatusRetryExcErr {
		t.Fatalf("probe of a killed client: %v %v, want RETRY_EXC_ERR", st, err)
	}
	if s := qp.State(); s != verbs.StateError {
		t.Fatalf("QP to the killed client is %v, want ERROR", s)
	}
	// A 0-byte WRITE on a QP connected afresh to the dead device fails too.
	q2, err := node.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(q2, verbs.AccessAll, fmt.Sprintf("shm://departer-%d-0", p.Process().Pid), 1); err != nil {
		t.Fatal(err)
	}
	if wc, err := postWait(q2, cq, verbs.SendWR{Opcode: verbs.OpWrite}); err != nil || wc.Status != verbs.StatusRetryExcErr {
		t.Fatalf("0-byte WRITE to a dead device: %v %v, want RETRY_EXC_ERR", wc.Status, err)
	}
}
