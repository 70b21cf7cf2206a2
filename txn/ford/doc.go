// Package ford is FORD (Zhang et al., FAST '22) on rdmakit: distributed
// transactions on disaggregated memory in which every step of a
// transaction is one-sided. The memory nodes are plain memnode servers
// (`rdmakit node`): their CPUs do no per-transaction work — nor any
// setup work beyond memnode's own (a region, its rkey in the connection
// reply). The layout's fingerprint and the coordinators' log areas are
// set up one-sided too: a CAS of a header word, a CAS of a claim word.
//
// # Layout
//
// Keys are placed by txn.Shard over the nodes (at least 2; 3 or more for
// f = 1 to spread backups), one shard per node. Shard s has F+1 copies
// (default F = 1): the primary on node s, backups on s+1 … s+F. Each
// node's region holds a header, C coordinator claim words, (F+1)·C log
// areas (a coordinator's log has a copy on its log node and the F next
// ones) and F+1 tables (layout.go). A table is Buckets fixed slots; a key lives
// in the first free slot of its window [home, home+MaxProbe) and never
// moves, in the same slot of every copy, so a client finds it with one
// READ (the window's first FirstProbe slots) and then caches the slot.
// A slot (slot.go):
//
//	lock word 8 B | version 8 B | meta 8 B (key length, present, value length) | CRC64 8 B | key 64 B | value
//
// A lock word (lockword.go) is 0, or bit 63 with the owner's coordinator
// id (15 bits) and its lease deadline (48 bits of µs). A coordinator id
// is a claimed claim word; it names one log area on its node (the
// coordinator's log node) and is held by one transaction at a time.
//
// # A transaction, as post lists
//
//	execution    Get: READ of the slot from the primary, or a backup (Config.BackupReads)
//	             Put/Insert/Delete, first time per record — hitchhiked locking:
//	               primary: [CAS lock 0→W, READ slot]   backups: [CAS lock 0→W]   one round trip
//	commit   1.  validate: per primary node one list of READs of (lock, version) of the records
//	             only read: each unlocked and unchanged                          one round trip
//	         2.  log: WRITE of the log record (logrec.go) into every copy of the
//	             coordinator's area, one list per copy's node                   one round trip
//	         3.  coalescent commit: per node one list, for every copy there of every
//	             written record [WRITE image (version … value), WRITE lock := 0]   one round trip
//	         4.  truncate the log (WRITE of its magic to 0), posted, not waited for
//
// So a read-write transaction commits in at most three round trips after
// execution (two when it read nothing it did not write: no validation);
// a read-only one in one (validation; none for a single read). Stats
// counts them (Rounds, CommitRounds, MaxCommitRounds). Every copy is
// locked, not only the primary, so that every copy's image is written
// only under its owner's lock — what makes recovery's roll-forward safe
// on backups too. A read from a backup is validated at the primary: a
// lagging or leading backup only costs an abort.
//
// # Leases and fencing
//
// Clocks are assumed loosely synchronised: any two clients' clocks differ
// by less than Config.Skew, and a posted request lands at its node within
// Config.Margin − Skew. A transaction's lock word carries the deadline
// now + Lease (≤ 1 s). The coordinator checks, before its log WRITE and
// again before its in-place WRITEs, that more than Margin of its lease is
// left; with less it aborts (before the log) or stops writing and lets
// recovery finish the commit (after). So nothing it posts lands after its
// deadline. A recoverer acts only on a lock whose deadline plus Skew has
// passed by its own clock, i.e. after the true deadline: the owner never
// writes in place again, and its log can no longer change. Lock words of
// one coordinator id strictly increase, so a word names one transaction.
//
// # Roll forward or back
//
// A transaction whose log record is complete was validated: its commit is
// decided, and once any copy was written and unlocked others may have read
// it. It is therefore rolled forward. A transaction without a complete
// record (crashed before or during the log WRITE: a torn or corrupt record
// fails its CRC and counts as none) wrote nothing in place — images are
// written only after the log WRITE completed — so it is rolled back: its
// locks are released, nothing else. The log therefore holds the new
// images (redo); old images are not needed.
//
// Recovery (recovery.go) runs in the client that meets an expired lock
// (a Get, a lock CAS) or in Sweep / Recover (what the `txn recover`
// command calls for a dead coordinator id). It READs the owner's log
// area. If it holds a valid record naming the same lock word, the
// recoverer adopts the transaction: it logs the same entries under a lock
// word of its own, CASes its word over the dead one on every copy still
// locked by it, WRITEs each such copy's image and unlocks it; a recoverer
// that dies half-way leaves copies under its own word, which its own log
// rolls forward. Otherwise it releases the record's copies by CAS from the
// exact dead word to 0, so a lock someone took since stays taken. Locks of
// a crashed, unlogged transaction on records nobody touches are freed by
// Sweep. No lock outlives its lease by more than the time its finder's
// recovery takes.
//
// The log has F+1 copies (logcopies.go): the record is WRITten to every
// live copy in one round; recovery READs every live copy in one round
// and rolls forward when one holds a valid record naming the lock word.
// Before it acts on a record a recoverer WRITEs it to every live copy:
// a coordinator that died during its log round may have left it on one
// copy only, whose node may die next. A copy gains a record only from
// its coordinator or from a copy that holds it, so once no live copy
// holds it none ever will: a decision to roll back is never contradicted.
//
// Without a membership (Config.Members empty) a memory node that fails
// is not replaced: operations that need it fail with txn.ErrUnreachable
// (a lock round releases the copies it took on the live nodes), and a
// commit whose log WRITE fails on a broken connection returns
// ErrUnreachable at once, its outcome unknown — the record may have
// landed, and only a reader of the log may decide — leaving its locks to
// their lease and whoever recovers them.
//
// # Failover
//
// Nodes started with StartNode (node.go) are a memnode region plus a
// member of the database's membership: the raft group (go.etcd.io/raft/v3
// over authenticated TCP) that txn/farm uses too (txn/internal/membership).
// It holds the Configuration: an epoch, each shard's primary and backups,
// the nodes out. Its leader takes out a node silent for NodeConfig.Silence
// (never the last copy of a shard: that would save nothing); every member
// applies the change alike: the node leaves every shard, each shard it was
// primary of is promoted to its first backup. Copies never move: a
// promoted backup already holds its shard in the same slots.
//
// A client with Config.Members queries a member for the configuration
// (config.go): a linearizable read (raft's ReadIndex), so the answer was
// the newest configuration at some point after the query was sent. It
// holds it as a view (view.go) and routes every round of a transaction by
// the view the transaction began under: Gets and lock READs go to the
// view's primary (or a backup of it with BackupReads), lock CASes,
// in-place WRITEs and unlocks to every copy in the view, validation to
// the primary, the log to its copies on nodes in the view.
//
// No committed transaction is lost. Commit reports success only when
// the round WRITing every copy of the view completed, or when recovery
// rolled the transaction forward, which writes every copy of its view
// too. A change only takes nodes out, so each copy of the new epoch was a
// copy of the old one, written under the same locks: the promoted backup
// holds every committed image.
//
// In-flight transactions meet the dead node as failed rounds. Before its
// log round a transaction aborts (txn.Run runs it again; the lock round
// releases the copies it took on live nodes, the dead node's are gone
// with it). After the log round — the round itself failing on the dead
// copy, or the in-place writes — the coordinator waits out its lease and
// recovers its own commit under the newest configuration in use (again
// under the next while a node is unreachable), so its caller learns the
// outcome. Locks of coordinators that died are recovered by lease, as
// ever, from the log copies on the live nodes.
//
// Fencing is by leases on configurations — clients cannot commit under
// an epoch once the next is in use. A view of epoch e is leased for
// NodeConfig.ConfigLease from the moment its query was sent; a
// transaction begins and takes its first lock (so sets its lock
// deadline) only under the lease, a recovery adopts only under it, and
// no round is posted after the lease's end plus Lease − Margin. Epoch
// e+1 committed at T; every answer of e was read before T, so every
// lease on e ends before T + ConfigLease, every transaction of e has
// posted its last request by T + ConfigLease + Lease, and its locks have
// expired by any client's clock a Skew later. Members apply e+1 after T,
// and clients use it only hold = ConfigLease + Lease + 2·Skew after the
// member they asked applied it (its age in the answer, then a local
// wait). So no transaction of e+1 overlaps one of e: e's locks it meets
// are expired and their logs final. A client that cannot renew (cut
// from the membership, or a zombie's only peer) stops with ErrStale.
// Per-epoch rkeys would fence without waiting, but verbs cannot register
// the same memory again under a new rkey, and an epoch word the node's
// CPU writes is not atomic with the NIC's CAS of a lock. The price is a
// failover of Silence plus hold, and clients that honour leases — as
// they honour lock leases already.
//
// Failover tests (failover_test.go, on the loop transport): SmallBank
// from three clients under the checker with node 0 killed mid-run, a
// killed log node of a coordinator stopped at StepLogged, a corrupt
// log copy, and a client whose lease on epoch 1 ran out.
//
// # Crash table
//
//	crash after          left behind                             repaired by                 outcome
//	locks taken          locks on every copy of the written      any client meeting a lock   rolled back: CAS W→0
//	(StepLocked)         records; log: none or another's         (or Sweep) after the lease
//	validation           same                                    same                        rolled back
//	(StepValidated)
//	log written          locks; complete log naming W             same, or Recover(id)        rolled forward
//	(StepLogged)
//	half the writes      some copies with new images, all         same                        rolled forward: the
//	(StepHalfWritten)    still locked by W                                                    rest written, all unlocked
//	half the unlocks     all images written; some copies          same                        rolled forward (unlocked
//	(StepHalfUnlocked)   unlocked (readable), others locked                                   copies skipped: CAS fails)
//	all unlocked         an untruncated log                       nobody needed (Recover: a   committed
//	(StepCommitted)                                               no-op, frees the id)
//
// Config.Hook stops a coordinator at any of these steps (the fault tests
// on the loop transport, and a process-kill harness over tcp).
//
// # Issuing post lists
//
// The protocol builds its lists and hands each phase to an issuer
// (issue.go): round posts them and returns when all completed — one round
// trip. The direct issuer (conn.go) posts on one QP per node and routes
// completions by wr_id to the waiting coordinator. Smart-DTX's issuer
// (smartdtx.go, below) posts each round as one smart.Task.DoAll
// (work-request credits, the coroutine throttle) and backs its lock
// rounds off on CAS failure, with no change to the protocol.
//
// # Smart-DTX
//
// Config.Smart makes the client Smart-DTX (Smart, ASPLOS '24: FORD's work
// requests issued by Smart's runtime; smartdtx.go). Dial starts a smart
// runtime of SmartConfig.Workers workers (default GOMAXPROCS), each with
// its own CQ and its own QP to every node (worker-aware resources; the
// DB's own QPs stay for setup and recovery). A transaction enters a task
// of a worker at Begin and leaves it when it ends — a coordinator always
// runs on the same worker, so its lazy log truncation is ordered before
// its next log WRITE on that worker's QP — and each of its rounds is one
// smart.Task.DoAll: the round's lists, one per node, posted on the
// worker's QPs under its credits and waited for together, so a round is
// still one round trip and the commit still at most three. The protocol
// is unchanged. SmartConfig.Techniques switches Smart's techniques, for
// an ablation:
//
//	Throttling          a worker's outstanding work requests are bounded by
//	                    credits; the bound is tuned by Algorithm 1's epochs
//	                    (4, 6, 8, 10, 12 or unlimited, Δ 8 ms, stable 480 ms;
//	                    SmartConfig.Tuner), or fixed by SmartConfig.Limit
//	Backoff             a lock CAS that finds a live owner is retried after a
//	                    truncated exponential backoff whose limit follows the
//	                    retry rate (C0 2 µs, at most 1024·C0), at most
//	                    MaxRetries (8) times, instead of aborting at once
//	CoroutineThrottle   n_max, the transactions a worker runs at once
//	                    (SmartConfig.Tasks, default 8), shrinks while the lock
//	                    retry rate is above 0.5 with the backoff limit at its
//	                    bound, and grows back below 0.1
//
// Techniques defaults to none: FORD+, FORD on per-worker QPs and CQs with
// Tasks transactions per worker (the baseline of Smart's Fig. 15);
// AllTechniques is Smart-DTX. Every transaction's failed lock attempts
// feed the worker's retry rate whichever switches are on, so DB.SmartStats
// reports it (with each worker's limit, credits, backoff maximum and
// n_max). A caller selects it with
//
//	cfg.Smart = &ford.SmartConfig{Techniques: ford.AllTechniques}      // Smart-DTX
//	cfg.Smart = &ford.SmartConfig{}                                    // FORD+
//	cfg.Smart = &ford.SmartConfig{Techniques: ford.Throttling, Limit: 8} // fixed throttling alone
//
// and runs at least Workers × Tasks goroutines of transactions to fill the
// workers (MaxTx defaults to at least that).
//
// Files: layout.go (Layout, region offsets), slot.go (slot format),
// lockword.go (lock words, leases), logrec.go (log record), logcopies.go
// (the log's F+1 copies), issue.go (the issuer seam, work-request
// builders), conn.go (direct issuer), coord.go (coordinator contexts and
// their buffers), db.go (Config, Dial, Close, claims), view.go (the
// configuration a transaction routes by, its lease), config.go (the
// client's queries of the membership), node.go (NodeConfig, StartNode),
// tx.go (execution: reads, hitchhiked locking), lookup.go (slot lookup),
// commit.go (validate, log, coalescent commit), recovery.go (roll
// forward/back, Recover), sweep.go (Sweep), hook.go (crash steps),
// stats.go, smartdtx.go (Smart-DTX: SmartConfig, its issuer).
package ford
