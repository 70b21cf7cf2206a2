package prismtx

import "sync/atomic"

// Test hooks: a fault test stops a committing client at one of these
// points (export_test.go) to leave what the point leaves in the table.
const (
	hookPrepared   = "prepared"   // validated at every node (PW raised), not decided
	hookDecided    = "decided"    // decided and installed on the decision's node, not on the others
	hookInstalling = "installing" // installed on one more node, not on the rest
)

// testHook, when set (by tests only), is called at each hook point with
// the committing client.
var testHook atomic.Pointer[func(point string, db *DB)]

func hook(point string, db *DB) {
	if h := testHook.Load(); h != nil {
		(*h)(point, db)
	}
}

// hooked reports whether a test hook is set.
func hooked() bool { return testHook.Load() != nil }
