package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Experiment is a named, runnable measurement.
type Experiment struct {
	// Name identifies the experiment on the command line and names its
	// output files; lower-case, no spaces.
	Name string
	// Description is one line saying what is measured.
	Description string
	// Run measures and returns the result; the harness fills in Meta.
	Run func(ctx context.Context, env *Env) (*Result, error)
}

var (
	registryMu  sync.RWMutex
	experiments = map[string]Experiment{}
)

// Register adds an experiment. It panics on an empty or duplicate name or
// a nil Run, which are programming errors.
func Register(e Experiment) {
	if e.Name == "" || strings.ContainsAny(e.Name, " /\\") || e.Run == nil {
		panic(fmt.Sprintf("bench: invalid experiment %q", e.Name))
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := experiments[e.Name]; dup {
		panic(fmt.Sprintf("bench: experiment %q registered twice", e.Name))
	}
	experiments[e.Name] = e
}

// List returns the registered experiments sorted by name.
func List() []Experiment {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]Experiment, 0, len(experiments))
	for _, e := range experiments {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Experiment) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup returns the experiment with the given name.
func Lookup(name string) (Experiment, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	e, ok := experiments[name]
	return e, ok
}
