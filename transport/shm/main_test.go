package shm_test

import (
	"os"
	"testing"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/transport/shm"
)

var pid = os.Getpid()

// TestMain lets the test binary play the roles of the child processes the
// tests start (remotedev.Role), node processes among them.
func TestMain(m *testing.M) { remotedev.TestMain(m, remotedev.WithCrash(shm.Crash)) }
