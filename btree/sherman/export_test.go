package sherman

// Hook points and the hook, for the package's external tests.
const (
	HookLocked      = hookLocked
	HookSplitHalf   = hookSplitHalf
	HookScanPlanned = hookScanPlanned
)

// SetTestHook sets the hook called at each hook point (nil: none).
func SetTestHook(h func(point string) error) { testHook = h }

// Decode exposes the node decoder to the fuzzer.
func Decode(l Layout, b []byte) error {
	l, err := l.withDefaults()
	if err != nil {
		return err
	}
	g := newGeometry(l)
	_, err = g.decode(b)
	return err
}

// NodeSizeOf is the node size of layout l.
func NodeSizeOf(l Layout) int {
	l, _ = l.withDefaults()
	return newGeometry(l).size
}

// LeafEntrySize is the bytes of one leaf entry of layout l.
func LeafEntrySize(l Layout) int {
	l, _ = l.withDefaults()
	return newGeometry(l).leafEnt
}

// PoisonSpec rewrites every speculative position of c: each key's slot
// moves by shift (mod the leaf's slots) and its node version by dver —
// positions that are stale in every way a real one can be.
func PoisonSpec(c *Client, shift int, dver uint64) int {
	n := 0
	c.spec.each(func(_ string, p specPos) specPos {
		n++
		p.slot = (p.slot + shift) % c.g.LeafSlots
		p.ver += dver
		return p
	})
	return n
}
