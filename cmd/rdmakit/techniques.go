package main

import (
	"fmt"
	"slices"
	"strings"
)

// parseTechniqueList parses a --techniques style flag of Smart's
// techniques: "all" (also empty) is all, "none" is 0, else a comma list
// of names' words. A wrong word is an error wrapping bad that names the
// flag and the words it takes.
func parseTechniqueList[T ~uint8](flag, s string, all T, names map[string]T, bad error) (T, error) {
	switch s = strings.TrimSpace(s); s {
	case "", "all":
		return all, nil
	case "none":
		return 0, nil
	}
	var t T
	for _, w := range strings.Split(s, ",") {
		one, ok := names[strings.TrimSpace(w)]
		if !ok {
			words := make([]string, 0, len(names))
			for n := range names {
				words = append(words, n)
			}
			slices.Sort(words)
			return 0, fmt.Errorf("%w: %s %q: want all, none or a comma list of %s", bad, flag, s, strings.Join(words, ", "))
		}
		t |= one
	}
	return t, nil
}
