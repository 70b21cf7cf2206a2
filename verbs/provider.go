package verbs

import (
	"fmt"
	"net/url"
	"sort"
	"sync"
)

// Provider opens devices of one URI scheme. Transports register a
// Provider in their init function.
type Provider interface {
	// Scheme is the URI scheme the provider serves, e.g. "loop".
	Scheme() string
	// Open opens the device the URI names.
	Open(u *url.URL) (Device, error)
}

var (
	providersMu sync.RWMutex
	providers   = map[string]Provider{}
)

// Register makes a provider available to Open. Registering a scheme twice
// replaces the earlier provider.
func Register(p Provider) {
	providersMu.Lock()
	defer providersMu.Unlock()
	providers[p.Scheme()] = p
}

// Providers returns the registered schemes in sorted order.
func Providers() []string {
	providersMu.RLock()
	defer providersMu.RUnlock()
	s := make([]string, 0, len(providers))
	for k := range providers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Open opens the device named by uri, e.g. "loop://fabric/node". An
// unparsable URI gives an error wrapping ErrBadURI; a scheme no provider
// registered gives one wrapping ErrUnknownScheme.
func Open(uri string) (Device, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadURI, uri, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme", ErrBadURI, uri)
	}
	providersMu.RLock()
	p, ok := providers[u.Scheme]
	providersMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q (registered: %v)", ErrUnknownScheme, u.Scheme, Providers())
	}
	d, err := p.Open(u)
	if err != nil {
		return nil, fmt.Errorf("verbs: open %s: %w", uri, err)
	}
	return d, nil
}
