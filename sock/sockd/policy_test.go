package sockd

import (
	"errors"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"", "anything", true},
		{"*", "shm://db", true},
		{"shm://db", "shm://db", true},
		{"shm://db", "shm://dbx", false},
		{"shm://*", "shm://db", true},
		{"tcp://*:5432", "tcp://10.0.0.1:5432", true},
		{"tcp://*:5432", "tcp://10.0.0.1:54321", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "acb", false},
		{"ab*ba", "aba", false},
	} {
		if got := match(tc.pattern, tc.s); got != tc.want {
			t.Errorf("match(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestPolicyRules(t *testing.T) {
	p, err := ParsePolicy([]byte(`{
		"default": "deny",
		"rules": [
			{"app": "batch", "to": "shm://db", "action": "deny"},
			{"to": "shm://db", "action": "allow"},
			{"app": "web", "to_app": "cache", "action": "allow"}
		]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		app, uri, owner string
		want            bool
	}{
		{"batch", "shm://db", "db", false}, // first match wins
		{"web", "shm://db", "db", true},
		{"web", "shm://c1", "cache", true},
		{"api", "shm://c1", "cache", false}, // default deny
	} {
		if got := p.Allows(tc.app, tc.uri, tc.owner); got != tc.want {
			t.Errorf("Allows(%q, %q, %q) = %v, want %v", tc.app, tc.uri, tc.owner, got, tc.want)
		}
	}
	var open Policy
	if !open.Allows("anyone", "shm://x", "y") {
		t.Error("the zero policy denies")
	}
}

func TestPolicyQuotas(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"quotas": {"*": {"max_conns": 5, "max_listeners": 2}, "web": {"max_conns": 10}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if q := p.QuotaOf("other"); q.MaxConns != 5 || q.MaxListeners != 2 {
		t.Errorf("other's quota %+v, want *'s", q)
	}
	if q := p.QuotaOf("web"); q.MaxConns != 10 || q.MaxListeners != 0 {
		t.Errorf("web's quota %+v, want its own entry only", q)
	}
}

func TestPolicyInvalid(t *testing.T) {
	for _, src := range []string{
		`{"default": "maybe"}`,
		`{"rules": [{"app": "x", "action": "permit"}]}`,
		`{"quotas": {"x": {"max_conns": -1}}}`,
		`{"quota": {}}`, // a typo is an error, not a dropped limit
		`{"rules": [{"app": "x", "acton": "allow"}]}`,
		`not json`,
	} {
		if _, err := ParsePolicy([]byte(src)); !errors.Is(err, ErrPolicy) {
			t.Errorf("ParsePolicy(%s): %v, want ErrPolicy", src, err)
		}
	}
}
