package sherman_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/internal/remotedev"
)

// TestMain lets the test binary play a memory node process
// (tcp_test.go).
func TestMain(m *testing.M) { remotedev.TestMain(m) }
