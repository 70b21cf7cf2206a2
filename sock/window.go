package sock

import (
	"sync/atomic"
	"unsafe"
)

// A window is the memory region one side of a link registers for its peer
// to WRITE into (the thesis' NTB memory window). Its layout:
//
//	0                 magic
//	64                sleeping: the peer has parked goroutines and wants a
//	                  doorbell after its next write here (written by the peer)
//	128 + 64·p        shadow[p]: the peer's read index of its ring p, i.e.
//	                  this side's shadow of how far the peer consumed what
//	                  this side sent (written by the peer)
//	128 + 64·MaxPartitions   ctrlShadow: the peer's read index of its
//	                  control ring (written by the peer)
//	4096 + R·p        ring p: records the peer sends (R = ring size)
//	4096 + R·P        control ring: credit entries the peer sends
//
// Every word the peer writes is an aligned 8-byte WRITE; every word this
// side reads it with an atomic load.
const (
	winMagicOff    = 0
	winSleepingOff = 64
	winShadowOff   = 128
	winCtrlShadow  = winShadowOff + 64*MaxPartitions
	winHeaderSize  = 4096
	ctrlEntries    = 4096               // entries of the control ring (8 bytes each)
	winMagic       = 0x31574b434f534b52 // "RKSOCKW1"
)

func shadowOff(p int) int { return winShadowOff + 64*p }

// windowLayout gives offsets of a window with parts rings of ringSize.
type windowLayout struct {
	parts, ringSize int
}

func (w windowLayout) ringOff(p int) int { return winHeaderSize + w.ringSize*p }
func (w windowLayout) ctrlOff() int      { return winHeaderSize + w.ringSize*w.parts }
func (w windowLayout) size() int         { return w.ctrlOff() + 8*ctrlEntries }

func load64(b []byte, off int) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[off])))
}

func store64(b []byte, off int, v uint64) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[off])), v)
}

func cas64(b []byte, off int, old, v uint64) bool {
	return atomic.CompareAndSwapUint64((*uint64)(unsafe.Pointer(&b[off])), old, v)
}
