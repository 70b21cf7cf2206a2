package prismtx

// Hook points for the fault tests.
const (
	HookPrepared   = hookPrepared
	HookDecided    = hookDecided
	HookInstalling = hookInstalling
)

// SetHook sets the test hook (nil removes it); call it before clients
// start.
func SetHook(h func(point string, db *DB)) {
	if h == nil {
		testHook.Store(nil)
		return
	}
	testHook.Store(&h)
}
