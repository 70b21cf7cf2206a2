package perf

import (
	"fmt"
	"strconv"
	"strings"
)

// Smallest and largest message sizes of the default sweep.
const (
	MinSize = 8
	MaxSize = 1 << 20
)

// PowersOfTwo returns the powers of two from lo to hi inclusive (lo is
// rounded up to a power of two).
func PowersOfTwo(lo, hi int) []int {
	var s []int
	for n := 1; n <= hi && n > 0; n <<= 1 {
		if n >= lo {
			s = append(s, n)
		}
	}
	return s
}

// ParseSizes parses a size list: one size ("4096"), a power-of-two range
// ("8-1048576") or a comma-separated mix of both. Sizes accept the
// suffixes K and M (powers of 1024).
func ParseSizes(s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := parseSize(lo)
		if err != nil {
			return nil, err
		}
		if !isRange {
			out = append(out, a)
			continue
		}
		b, err := parseSize(hi)
		if err != nil {
			return nil, err
		}
		if b < a {
			return nil, fmt.Errorf("size range %q is empty", part)
		}
		out = append(out, PowersOfTwo(a, b)...)
	}
	return out, nil
}

func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 1<<30/mult {
		return 0, fmt.Errorf("bad message size %q", s)
	}
	return n * mult, nil
}
