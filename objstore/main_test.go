package objstore

import (
	"testing"

	"github.com/rdmakit/rdmakit/internal/remotedev"
)

// TestMain lets the test binary play the child processes the fault
// tests start and kill (remotedev.Role).
func TestMain(m *testing.M) { remotedev.TestMain(m) }
