package prismtx

// Test hooks: a fault test stops a committing client at one of these
// points (export_test.go) to leave what the point leaves in the table.
const (
	hookPrepared   = "prepared"   // validated at every node (PW raised), not decided
	hookDecided    = "decided"    // the decision record says commit, nothing installed
	hookInstalling = "installing" // the first write installed, the others not
)

// testHook, when set (by tests only, before clients start), is called at
// each hook point with the committing client.
var testHook func(point string, db *DB)

func hook(point string, db *DB) {
	if h := testHook; h != nil {
		h(point, db)
	}
}
