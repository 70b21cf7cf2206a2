package sockd

import (
	"log/slog"
	"os"
	"testing"

	"github.com/rdmakit/rdmakit/internal/remotedev"
)

func TestMain(m *testing.M) {
	// Registrations, departures and failed links are logged at Info:
	// keep test output to warnings.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	remotedev.TestMain(m)
}
