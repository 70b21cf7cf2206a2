package sherman

// Hook points and the hook, for the package's external tests.
const (
	HookLocked    = hookLocked
	HookSplitHalf = hookSplitHalf
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
