package bench

import (
	"context"
	"fmt"
	"time"
)

// Run runs the named experiment, tags its result with Meta and, when
// opts.OutDir is set, writes NAME.json, NAME.md and NAME.png there. It
// returns the result and the paths written.
func Run(ctx context.Context, name string, opts Options) (*Result, []string, error) {
	e, ok := Lookup(name)
	if !ok {
		return nil, nil, fmt.Errorf("bench: no experiment %q (see rdmakit bench list)", name)
	}
	env := newEnv(opts)
	meta := collectMeta(&env.Options)
	env.Log.Info("running experiment", "name", name, "quick", opts.Quick, "poll", meta.Poll)
	start := time.Now()
	r, err := e.Run(ctx, env)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %s: %w", name, err)
	}
	r.Name = name
	// The experiment may have said which transport and devices it used.
	if r.Meta.Transport != "" {
		meta.Transport = r.Meta.Transport
	}
	meta.Device = r.Meta.Device
	meta.Extra = r.Meta.Extra
	meta.Elapsed = time.Since(start).Round(time.Millisecond).String()
	r.Meta = meta
	env.Log.Info("experiment done", "name", name, "elapsed", meta.Elapsed, "rows", len(r.Rows))
	if opts.OutDir == "" {
		return r, nil, nil
	}
	paths, err := WriteFiles(opts.OutDir, r)
	return r, paths, err
}
