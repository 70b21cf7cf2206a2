package sockd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Policy is what the daemon enforces: an allow-list of which applications
// may connect to which listeners, and per-application quotas. It is read
// from a JSON file (see docs/sockd.md):
//
//	{
//	  "default": "deny",
//	  "rules": [
//	    {"app": "web", "to": "shm://db", "action": "allow"},
//	    {"app": "*", "to_app": "cache", "action": "allow"}
//	  ],
//	  "quotas": {
//	    "*":   {"max_conns": 1000, "max_listeners": 16, "max_window_bytes": 1073741824},
//	    "web": {"max_conns": 10}
//	  }
//	}
//
// The zero Policy (and no policy file) allows everything without limits.
type Policy struct {
	// Default is what happens to a connection no rule matches: "allow"
	// (the default when empty) or "deny".
	Default string `json:"default,omitempty"`
	// Rules are tried in order; the first that matches decides.
	Rules []Rule `json:"rules,omitempty"`
	// Quotas maps an application to its limits; "*" holds the limits of
	// applications without an entry of their own. An application's entry
	// replaces "*"'s entirely.
	Quotas map[string]Quota `json:"quotas,omitempty"`
}

// Rule matches a connection by the dialing application and the listener.
// Patterns may use '*' for any run of characters; an empty pattern matches
// everything.
type Rule struct {
	App    string `json:"app,omitempty"`    // the dialing application
	To     string `json:"to,omitempty"`     // the listener's URI: shm://NAME, tcp://HOST:PORT
	ToApp  string `json:"to_app,omitempty"` // the listening application
	Action string `json:"action"`           // "allow" or "deny"
}

// Quota limits one application. A zero field means no limit.
type Quota struct {
	// MaxConns bounds the connections the application (as the dialer) holds
	// admitted and not yet released, over all listeners.
	MaxConns int `json:"max_conns,omitempty"`
	// MaxListeners bounds the listeners the application registers.
	MaxListeners int `json:"max_listeners,omitempty"`
	// MaxWindowBytes bounds the window memory of its listeners: partitions
	// × ring size, summed over its registered listeners.
	MaxWindowBytes int64 `json:"max_window_bytes,omitempty"`
}

// LoadPolicy reads a policy file.
func LoadPolicy(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sockd: policy: %w", err)
	}
	return ParsePolicy(b)
}

// ParsePolicy parses a policy in JSON; unknown fields are errors (a typo
// must not silently drop a limit).
func ParsePolicy(b []byte) (*Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Policy
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks the actions and limits.
func (p *Policy) Validate() error {
	switch p.Default {
	case "", "allow", "deny":
	default:
		return fmt.Errorf("%w: default %q (allow or deny)", ErrPolicy, p.Default)
	}
	for i, r := range p.Rules {
		if r.Action != "allow" && r.Action != "deny" {
			return fmt.Errorf("%w: rule %d: action %q (allow or deny)", ErrPolicy, i, r.Action)
		}
	}
	for app, q := range p.Quotas {
		if q.MaxConns < 0 || q.MaxListeners < 0 || q.MaxWindowBytes < 0 {
			return fmt.Errorf("%w: quota of %q: negative limit", ErrPolicy, app)
		}
	}
	return nil
}

// Allows says whether app may connect to the listener at uri of listenerApp.
func (p *Policy) Allows(app, uri, listenerApp string) bool {
	for _, r := range p.Rules {
		if match(r.App, app) && match(r.To, uri) && match(r.ToApp, listenerApp) {
			return r.Action == "allow"
		}
	}
	return p.Default != "deny"
}

// QuotaOf returns app's limits.
func (p *Policy) QuotaOf(app string) Quota {
	if q, ok := p.Quotas[app]; ok {
		return q
	}
	return p.Quotas["*"]
}

// match reports whether s matches pattern, where '*' stands for any run of
// characters (including '/') and an empty pattern matches everything.
func match(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last)
}
