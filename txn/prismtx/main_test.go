package prismtx_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/rdmakit/rdmakit/internal/remotedev"
)

// TestMain lets the test binary play a node process and a client process
// (tcp_test.go); warnings are left out of the output.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	remotedev.TestMain(m)
}
