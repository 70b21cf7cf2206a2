package bench

import (
	"fmt"
	"slices"
)

// Column describes one column of a Result.
type Column struct {
	// Name is the column's key, used by Plot and in JSON.
	Name string `json:"name"`
	// Unit is the unit of the column's values, e.g. "µs"; empty for none.
	Unit string `json:"unit,omitempty"`
}

// Header is the column's display name: "Name [Unit]" or "Name".
func (c Column) Header() string {
	if c.Unit == "" {
		return c.Name
	}
	return c.Name + " [" + c.Unit + "]"
}

// Plot describes a chart drawn from a Result's rows: Y against X, one line
// per distinct value of the Series columns, over the rows matching Where.
type Plot struct {
	Title string `json:"title"`
	// X and Y name numeric columns.
	X string `json:"x"`
	Y string `json:"y"`
	// Series name the columns whose values, joined by a space, label a
	// line; empty draws a single line.
	Series []string `json:"series,omitempty"`
	// Where keeps only rows whose column (key) formats (%v) to the value.
	Where map[string]string `json:"where,omitempty"`
	// LogX and LogY use logarithmic axes, for values spanning decades.
	LogX bool `json:"log_x,omitempty"`
	LogY bool `json:"log_y,omitempty"`
	// Bars draws one bar of Y per matching row instead of lines, labelled
	// by the values of the Series columns; X is unused. For results whose
	// rows are categories (systems, settings) rather than a sweep.
	Bars bool `json:"bars,omitempty"`
}

// Result is the outcome of an experiment: a table with typed values,
// notes, the plots to draw and the metadata of the run.
type Result struct {
	// Name is the experiment's name; it names the output files.
	Name string `json:"name"`
	// Title is a one-line headline.
	Title   string   `json:"title"`
	Columns []Column `json:"columns"`
	// Rows hold one value per column: string, bool, an integer, float64,
	// or nil for "not applicable".
	Rows  [][]any  `json:"rows"`
	Notes []string `json:"notes,omitempty"`
	Plots []Plot   `json:"plots,omitempty"`
	Meta  Meta     `json:"meta"`
}

// AddRow appends a row. It panics if the number of values differs from
// the number of columns, a programming error.
func (r *Result) AddRow(values ...any) {
	if len(values) != len(r.Columns) {
		panic(fmt.Sprintf("bench: row of %d values for %d columns", len(values), len(r.Columns)))
	}
	r.Rows = append(r.Rows, values)
}

// Column returns the index of the named column, or -1.
func (r *Result) Column(name string) int {
	return slices.IndexFunc(r.Columns, func(c Column) bool { return c.Name == name })
}
