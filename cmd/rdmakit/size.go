package main

import (
	"fmt"
	"strconv"
	"strings"
)

// sizeUnits are the suffixes parseBytes accepts, longest first; all are
// powers of 1024.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"k", 1 << 10},
	{"B", 1},
}

// parseBytes parses a byte count: digits with an optional suffix KiB,
// MiB, GiB, TiB (or K, M, G, T; all powers of 1024) or B, e.g. "4KiB",
// "64MiB", "1G", "4096".
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q (want e.g. 4096, 4KiB, 64MiB, 1GiB)", s)
	}
	return n * mult, nil
}

// formatBytes formats n with the largest binary unit that divides it,
// e.g. "64 MiB", "4 KiB", "100 B".
func formatBytes(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return fmt.Sprintf("%d %s", n/u.mult, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}
