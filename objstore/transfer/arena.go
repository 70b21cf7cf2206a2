package transfer

import (
	"unsafe"

	"github.com/rdmakit/rdmakit/verbs"
)

// inArena returns the device address of b when b lies inside the
// registered arena (Config.Arena), so a READ can name it by the arena's
// keys instead of a registration of its own.
func inArena(arena verbs.MR, b []byte) (uint64, bool) {
	if arena == nil || len(b) == 0 {
		return 0, false
	}
	mem := arena.Bytes()
	if len(mem) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p-base > uintptr(len(mem)) || uintptr(len(b)) > uintptr(len(mem))-(p-base) {
		return 0, false
	}
	return arena.Addr() + uint64(p-base), true
}
