package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// tokenEnv is the environment variable a token may come from: unlike a
// command-line flag it is not visible to other users in /proc.
const tokenEnv = "RDMAKIT_TOKEN"

// tokenFlags are the three ways to give an auth token: --token,
// --token-file, or $RDMAKIT_TOKEN.
type tokenFlags struct {
	token, file string
}

func (t *tokenFlags) add(fl *pflag.FlagSet, what string) {
	fl.StringVar(&t.token, "token", "", what+" (visible to other local users in /proc: prefer --token-file or $"+tokenEnv+")")
	fl.StringVar(&t.file, "token-file", "", "read the auth token from this file (its first line)")
}

// value returns the token: --token, else the first line of --token-file,
// else $RDMAKIT_TOKEN, else none.
func (t *tokenFlags) value() (string, error) {
	switch {
	case t.token != "" && t.file != "":
		return "", errors.New("--token and --token-file: give one")
	case t.token != "":
		return t.token, nil
	case t.file != "":
		b, err := os.ReadFile(t.file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		tok, _, _ := strings.Cut(string(b), "\n")
		if tok = strings.TrimRight(tok, "\r"); tok == "" {
			return "", fmt.Errorf("--token-file %s: the first line is empty", t.file)
		}
		return tok, nil
	}
	return os.Getenv(tokenEnv), nil
}

// withQuery returns uri with the query parameter key set to value (uri
// unchanged when value is empty).
func withQuery(uri, key, value string) (string, error) {
	if value == "" {
		return uri, nil
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("--uri %q: %w", uri, err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
