package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/rpc"
)

// The replica's RPC methods (package rpc; payloads little-endian). Every
// method but MethodCreate and MethodClaim fails with blockstore.ErrNoVolume
// until a volume is created.
const (
	// MethodInfo: request empty; response the volume's Info
	// (Info.Marshal).
	MethodInfo = 1
	// MethodCreate: request a Layout (MarshalLayout); response the
	// volume's Info. Creating the volume the replica already holds, same
	// layout, succeeds again; another layout fails with ErrExists.
	MethodCreate = 2
	// MethodClaim: request u32 client id; response u8 1.
	// The id is this connection's until it closes (a second claim
	// replaces the first); an id another connection holds fails with
	// ErrIDTaken.
	MethodClaim = 3
	// MethodReadTag (ABD phase 1 of a write): request u64 block;
	// response u64 tag.
	MethodReadTag = 4
	// MethodRead (ABD phase 1 of a read): request u64 block; response
	// u64 tag | BlockSize bytes of data.
	MethodRead = 5
	// MethodWrite (ABD phase 2): request u64 block | u64 tag | BlockSize
	// bytes of data; response u64 the tag held before | u8 1 when this
	// write's tag was newer and is now held, else 0. Either is an ack:
	// the replica holds a tag at least as new.
	MethodWrite = 6
)

// While a replica recovers (Config.Join), MethodInfo, MethodCreate,
// MethodReadTag and MethodRead fail with ErrRecovering: it is not a
// member of the volume yet, and its clients leave it out.

// Errors of the replica.
var (
	// ErrExists: a volume with another layout is already on the replica.
	ErrExists = errors.New("replica: another volume exists")
	// ErrIDTaken: another connection holds the client id.
	ErrIDTaken = errors.New("replica: client id taken")
	// ErrRecovering: the replica is copying the volume from the others
	// (Config.Join) and is not a member yet.
	ErrRecovering = errors.New("replica: recovering, not a member yet")
)

// Info is what a client needs of a replica: the volume's layout and
// where its PRISM-RS region is.
type Info struct {
	Layout blockstore.Layout
	// RKey is the region's; Slots the address of block 0's slot (block
	// i's is Slots+16·i), Zero the buffer of a block never written.
	RKey  uint32
	Slots uint64
	Zero  uint64
	// Ring and RingSlots are the return ring's (prism.ReturnRing).
	Ring      uint64
	RingSlots uint32
	// Queue is the free list of ⟨tag | data⟩ buffers, BufSize their size.
	Queue   uint32
	BufSize uint32
}

// SlotAddr is block id's slot.
func (in Info) SlotAddr(id uint64) uint64 { return in.Slots + SlotSize*id }

// Sizes of the encodings.
const (
	infoHead   = 56
	layoutHead = 13
	// MaxAddr bounds a replica address in a layout.
	MaxAddr = 255
	// MaxInfo bounds an encoded Info (and an encoded Layout).
	MaxInfo = infoHead + 1 + blockstore.MaxReplicas*(1+MaxAddr)
)

// MarshalLayout encodes l: u32 block size | u64 blocks | u8 n | n ×
// (u8 length | address).
func MarshalLayout(l blockstore.Layout) ([]byte, error) {
	b := make([]byte, layoutHead, MaxInfo)
	binary.LittleEndian.PutUint32(b, uint32(l.BlockSize))
	binary.LittleEndian.PutUint64(b[4:], l.Blocks)
	return appendReplicas(b[:12], l.Replicas)
}

func appendReplicas(b []byte, rs []string) ([]byte, error) {
	if len(rs) > blockstore.MaxReplicas {
		return nil, fmt.Errorf("%w: %d replicas", blockstore.ErrReplicas, len(rs))
	}
	b = append(b, byte(len(rs)))
	for _, r := range rs {
		if len(r) > MaxAddr {
			return nil, fmt.Errorf("%w: a %d-byte address", blockstore.ErrReplicas, len(r))
		}
		b = append(b, byte(len(r)))
		b = append(b, r...)
	}
	return b, nil
}

// UnmarshalLayout decodes MarshalLayout's encoding and checks it.
func UnmarshalLayout(b []byte) (blockstore.Layout, error) {
	if len(b) < layoutHead {
		return blockstore.Layout{}, fmt.Errorf("%w: a %d-byte layout", blockstore.ErrProtocol, len(b))
	}
	l := blockstore.Layout{BlockSize: int(binary.LittleEndian.Uint32(b)), Blocks: binary.LittleEndian.Uint64(b[4:])}
	rs, err := parseReplicas(b[12:])
	if err != nil {
		return blockstore.Layout{}, err
	}
	l.Replicas = rs
	return l, l.Check()
}

func parseReplicas(b []byte) ([]string, error) {
	n := int(b[0])
	if n > blockstore.MaxReplicas {
		return nil, fmt.Errorf("%w: %d replicas", blockstore.ErrReplicas, n)
	}
	b = b[1:]
	rs := make([]string, 0, n)
	for range n {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return nil, fmt.Errorf("%w: a replica list cut short", blockstore.ErrProtocol)
		}
		rs = append(rs, string(b[1:1+b[0]]))
		b = b[1+b[0]:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the replica list", blockstore.ErrProtocol, len(b))
	}
	return rs, nil
}

// Marshal encodes in: u32 block size | u32 0 | u64 blocks | u64 slots |
// u64 zero | u64 ring | u32 rkey | u32 ring slots | u32 queue | u32 buffer
// size | the replica list as in MarshalLayout.
func (in Info) Marshal() ([]byte, error) {
	b := make([]byte, infoHead, MaxInfo)
	le := binary.LittleEndian
	le.PutUint32(b, uint32(in.Layout.BlockSize))
	le.PutUint64(b[8:], in.Layout.Blocks)
	le.PutUint64(b[16:], in.Slots)
	le.PutUint64(b[24:], in.Zero)
	le.PutUint64(b[32:], in.Ring)
	le.PutUint32(b[40:], in.RKey)
	le.PutUint32(b[44:], in.RingSlots)
	le.PutUint32(b[48:], in.Queue)
	le.PutUint32(b[52:], in.BufSize)
	return appendReplicas(b, in.Layout.Replicas)
}

// UnmarshalInfo decodes Info.Marshal's encoding and checks that it
// describes a volume: a valid layout, buffers that hold a tag and a
// block, a ring.
func UnmarshalInfo(b []byte) (Info, error) {
	if len(b) < infoHead+1 {
		return Info{}, fmt.Errorf("%w: a %d-byte replica info", blockstore.ErrProtocol, len(b))
	}
	le := binary.LittleEndian
	in := Info{Layout: blockstore.Layout{BlockSize: int(le.Uint32(b)), Blocks: le.Uint64(b[8:])},
		Slots: le.Uint64(b[16:]), Zero: le.Uint64(b[24:]), Ring: le.Uint64(b[32:]), RKey: le.Uint32(b[40:]),
		RingSlots: le.Uint32(b[44:]), Queue: le.Uint32(b[48:]), BufSize: le.Uint32(b[52:])}
	rs, err := parseReplicas(b[infoHead:])
	if err != nil {
		return Info{}, err
	}
	in.Layout.Replicas = rs
	if err := in.Layout.Check(); err != nil {
		return Info{}, fmt.Errorf("%w: the replica's layout: %w", blockstore.ErrProtocol, err)
	}
	if int(in.BufSize) < BufHead+in.Layout.BlockSize || in.RingSlots == 0 || in.Slots%SlotSize != 0 {
		return Info{}, fmt.Errorf("%w: replica info %+v", blockstore.ErrProtocol, in)
	}
	return in, nil
}

// known are the errors a handler's text may start with, in the order
// MapErr tries them.
var known = []error{ErrExists, ErrIDTaken, ErrRecovering, blockstore.ErrNoVolume, blockstore.ErrBlockSize,
	blockstore.ErrOutOfRange, blockstore.ErrReplicas, blockstore.ErrProtocol}

// MapErr turns a replica handler's error, as a client's rpc call returns
// it (*rpc.RemoteError), back into the typed error it was; other errors
// pass unchanged.
func MapErr(err error) error {
	var re *rpc.RemoteError
	if !errors.As(err, &re) {
		return err
	}
	for _, k := range known {
		if rest, ok := strings.CutPrefix(re.Msg, k.Error()); ok {
			if rest = strings.TrimPrefix(rest, ": "); rest == "" {
				return k
			}
			return fmt.Errorf("%w: %s", k, rest)
		}
	}
	return err
}
