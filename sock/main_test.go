package sock

import (
	"testing"

	"github.com/rdmakit/rdmakit/internal/remotedev"
)

// TestMain lets the test binary play the child processes the tests start
// (remotedev.Role): peers that are killed mid-stream.
func TestMain(m *testing.M) { remotedev.TestMain(m) }
