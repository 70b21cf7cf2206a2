package shm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmakit/rdmakit/internal/wire"
	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
)

// dial connects to the device name: it creates the connection's rings,
// sends them and its own node segment in a HELLO, and maps the node
// segment of the WELCOME.
func (d *device) dial(address, name string) (*link, error) {
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: socketName(name), Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("shm: dial %s: %w", address, err)
	}
	fail := func(err error) (*link, error) {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(d.opts.dialTimeout))
	rings, err := newConnSeg(d.name+"-"+name, d.opts.ring)
	if err != nil {
		return fail(fmt.Errorf("shm: connection rings: %w", err))
	}
	hello := ctlMsg{kind: ctlHello, u32: uint32(d.opts.ring), address: d.node.Address(), fds: []int{rings.seg.FD(), d.seg.seg.FD()}}
	if err := sendCtl(conn, &hello); err != nil {
		rings.seg.Close()
		return fail(fmt.Errorf("shm: hello to %s: %w", address, err))
	}
	m, err := recvCtl(conn)
	if err != nil {
		rings.seg.Close()
		return fail(fmt.Errorf("shm: welcome from %s: %w", address, err))
	}
	switch m.kind {
	case ctlWelcome:
	case ctlReject:
		rings.seg.Close()
		return fail(fmt.Errorf("%w by %s: %s", ErrRejected, address, m.address))
	default:
		closeFDs(m.fds)
		rings.seg.Close()
		return fail(fmt.Errorf("%w: %s answered kind %d", ErrProtocol, address, m.kind))
	}
	peerSeg, err := openNodeSeg(m.fds[0])
	if err != nil {
		closeFDs(m.fds)
		rings.seg.Close()
		return fail(err)
	}
	peerDep, err := openDepSeg(m.fds[1])
	closeFDs(m.fds)
	if err != nil {
		rings.seg.Close()
		peerSeg.close()
		return fail(err)
	}
	peer, err := peerProcess(conn)
	if err != nil {
		rings.seg.Close()
		peerSeg.close()
		peerDep.close()
		return fail(err)
	}
	_ = conn.SetDeadline(time.Time{})
	l := &link{d: d, address: address, conn: conn, peer: peer, selfTag: addrTag(d.node.Address()), rings: rings, peerSeg: peerSeg,
		peerDep: peerDep, peerID: m.u32, me: uint64(shmem.Self())}
	l.locks = newSharedLocks(peerSeg, l.resolve)
	empty := map[uint32]*mapping{}
	l.maps.Store(&empty)
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.seenAt = time.Now()
	d.wg.Add(1)
	go l.readControl()
	return l, nil
}

// peerProcess names the process at the other end of a Unix socket.
func peerProcess(c *net.UnixConn) (shmem.ProcessID, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, fmt.Errorf("shm: SO_PEERCRED: %w", cerr)
	}
	return shmem.ProcessOf(int(cred.Pid))
}

// accept takes connections until the listener closes.
func (d *device) accept() {
	defer d.wg.Done()
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			if d.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(time.Millisecond)
			continue
		}
		d.wg.Add(1)
		go d.handshake(c)
	}
}

// handshake answers a HELLO: it maps the peer's rings and node segment,
// sends its own node segment, and starts the session.
func (d *device) handshake(c *net.UnixConn) {
	defer d.wg.Done()
	_ = c.SetDeadline(time.Now().Add(d.opts.dialTimeout))
	reject := func(why string) {
		m := ctlMsg{kind: ctlReject, address: why}
		_ = sendCtl(c, &m)
		c.Close()
	}
	m, err := recvCtl(c)
	if err != nil {
		c.Close()
		return
	}
	if m.kind != ctlHello {
		closeFDs(m.fds)
		reject(fmt.Sprintf("expected HELLO, got kind %d", m.kind))
		return
	}
	u, perr := url.Parse(m.address)
	if perr != nil || u.Scheme != Scheme || !nameRE.MatchString(u.Host) {
		closeFDs(m.fds)
		reject(fmt.Sprintf("bad device address %q", m.address))
		return
	}
	rings, err := openConnSeg(m.fds[0], 1<<30)
	if err != nil {
		closeFDs(m.fds)
		reject(err.Error())
		return
	}
	peerSeg, err := openNodeSeg(m.fds[1])
	closeFDs(m.fds)
	if err != nil {
		rings.seg.Close()
		reject(err.Error())
		return
	}
	peer, err := peerProcess(c)
	if err != nil {
		rings.seg.Close()
		peerSeg.close()
		reject(err.Error())
		return
	}
	id := d.peers.Add(m.address)
	s := &session{
		d: d, conn: c, address: m.address, peerID: id, peer: peer, rings: rings, peerSeg: peerSeg,
		ns:     d.node.NewSession(id, m.address),
		maxLen: uint32(rings.req.MaxMessage() - wire.ResponseHeader - 64),
		wake:   make(chan struct{}, 1),
	}
	w := ctlMsg{kind: ctlWelcome, u32: id, address: d.node.Address(), fds: []int{d.seg.seg.FD(), d.dep.seg.FD()}}
	if err := sendCtl(c, &w); err != nil {
		s.closed.Store(true)
		d.peers.Drop(id)
		s.ns.Close()
		rings.seg.Close()
		peerSeg.close()
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	d.mu.Lock()
	if d.closed.Load() {
		d.mu.Unlock()
		d.peers.Drop(id)
		s.ns.Close()
		rings.seg.Close()
		peerSeg.close()
		c.Close()
		return
	}
	d.sessions[s] = struct{}{}
	d.snapSessionsLocked()
	d.wg.Add(2)
	d.mu.Unlock()
	d.publisher.attach(s)
	go s.write()
	go s.read()
}
