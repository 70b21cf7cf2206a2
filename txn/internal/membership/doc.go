// Package membership is the configuration service of rdmakit's
// replicated transaction systems (txn/farm, txn/ford): the memory nodes
// of a database run a raft group (go.etcd.io/raft/v3, in memory) over
// authenticated TCP that holds its Configuration — an epoch, each
// shard's primary and backups, the nodes taken out. The leader takes
// out a node silent for longer than Config.Silence; every member
// applies the change alike: the node leaves every shard, a shard it was
// primary of is promoted to its first backup, and the epoch moves on.
//
// Clients learn the configuration from the system's own protocol (FaRM's
// MethodConfig RPC) or by Query on a member's membership address: a
// linearizable read (raft's ReadIndex), so the answer was the newest
// configuration at some point after the query was sent — what a lease
// on it needs (txn/ford).
//
// Files: configuration.go (Configuration, its commands and codec),
// member.go (Member: the raft loop, failure detection), read.go
// (linearizable reads), raftnet.go (the transport), query.go (the
// clients' query).
package membership
