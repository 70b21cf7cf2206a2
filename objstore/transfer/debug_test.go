package transfer

import (
	"log/slog"
	"os"
)

func init() {
	if os.Getenv("TRANSFER_DEBUG") != "" {
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})))
	}
}
