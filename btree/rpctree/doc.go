// Package rpctree is the "just use RPC" baseline of rdmakit's ordered
// index: the tree is held in a server's CPU (github.com/google/btree
// under a read-write lock) and clients reach it by two-sided calls
// (package rpc) — one round trip per Get, Put and Delete, one per page of
// a Scan — where btree/sherman does the same with one-sided verbs and no
// server CPU.
//
// The server is a memnode.Service (Service, served by memnode.Start with
// Config.NewService = NewService(...)), so it shares the memory node's
// handshake, token and liveness; its connection reply carries the
// service's Name, which Dial checks (ErrLayout when a node serves
// something else). Clients (Dial) implement btree.Tree.
//
// Wire (payloads of rpc messages; lengths little-endian):
//
//	Get     req: key                          resp: found byte · value
//	Put     req: klen u8 · key · value        resp: empty
//	Delete  req: key                          resp: empty
//	Scan    req: limit u32 · flen u8 · from · tflag u8 · to
//	        resp: more u8 · n × (klen u8 · vlen u16 · key · value)
//
// A Scan answers as many keys as fit in a message; when more is set the
// client asks again from just after the last key it got. Each page is
// a snapshot under the read lock; a scan of many pages is not one.
//
// Files: doc.go, wire.go (method numbers, encodings), service.go (the
// server), client.go (Dial, Client, Stats), scan.go (the iterator).
package rpctree
