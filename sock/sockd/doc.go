// Package sockd is sock's control plane: the per-host daemon `rdmakit
// sockd` (the thesis' NTM and NTP) and the Client through which the
// library talks to it.
//
//	srv, err := sockd.Start(ctx, sockd.Config{Policy: policy}) // the daemon
//	cp := &sockd.Client{}                                      // in each process
//	ln, err := sock.Config{App: "web", Control: cp}.Listen(ctx, "shm://web")
//	d := &sock.Dialer{Config: sock.Config{App: "api", Control: cp}}
//	c, err := d.DialContext(ctx, "tcp", "db.example:5432") // sock if rdmakit, else TCP
//
// A listener registers with the local daemon over its Unix socket and keeps
// that connection — its session — open for its life. Every connection
// offered to the listener is admitted (or refused) by the daemon over the
// session: the allow-list (Policy.Rules) and the dialing application's
// max_conns decide, and the daemon picks the least-loaded partition of the
// listener. The session's end — Close, or the process's death, which the
// kernel turns into a closed socket — withdraws the listener and releases
// everything admitted to it; a periodic pid check catches a dead process
// whose socket another process inherited.
//
// The daemon also answers, on a TCP port (DefaultPort), whether a plain
// address HOST:PORT of its host is an rdmakit endpoint. Client.Resolve
// asks HOST's daemon and nothing else: no daemon, no answer within
// ResolveTimeout, or no listener registered there all mean plain TCP, so a
// dialer never sends a byte to an ordinary server's port before it knows.
//
// Files: wire.go (the framed, versioned protocol), policy.go (allow-list
// and quotas), table.go (the daemon's state, no I/O), server.go (the
// daemon), client.go and session.go (the library's side), status.go.
// docs/sockd.md describes the policy file and the commands.
package sockd
