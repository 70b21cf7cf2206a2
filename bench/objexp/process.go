package objexp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/objstore/node"
)

// store is `rdmakit objstore serve` in its own process.
type store struct {
	node.Announcement
	*bench.Child
}

// storeStartup bounds how long a store takes to announce itself.
const storeStartup = 30 * time.Second

// startStore runs `rdmakit objstore serve ARGS…` through env.Command and
// waits for its announcement (bench.StartChild).
func startStore(ctx context.Context, env *bench.Env, args ...string) (*store, error) {
	s := &store{}
	c, err := bench.StartChild(ctx, env, storeStartup, func(line string) error {
		a, err := node.ParseAnnouncement(line)
		s.Announcement = a
		return err
	}, append([]string{"objstore", "serve"}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("objexp: %w", err)
	}
	s.Child = c
	return s, nil
}

// errNoCommandNote is the note of an experiment run without a way to
// start stores.
func errNoCommandNote(err error) string {
	if errors.Is(err, bench.ErrNoCommand) {
		return fmt.Sprintf("no store rows: %v.", err)
	}
	return err.Error()
}
