package prismkv

// Test hooks: a kill test stops a writer at one of these points to kill
// it there, holding what the point holds (export_test.go).
const (
	hookLocked    = "locked"    // an insert holds its home segment's lock, its install list not yet posted
	hookReturning = "returning" // return ring slots reserved, not yet filled
)

// testHook, when set (by tests only, before clients start), is called at
// each hook point.
var testHook func(point string)

func hook(point string) {
	if h := testHook; h != nil {
		h(point)
	}
}
