package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// WriteMarkdown writes the result as Markdown: a heading, the metadata as
// a list, the table and the notes.
func WriteMarkdown(w io.Writer, r *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", r.Title)
	m := &r.Meta
	item := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "- **%s:** %s\n", k, v)
		}
	}
	item("experiment", "`"+r.Name+"`")
	item("machine", fmt.Sprintf("%s, %d cores, %s/%s", m.CPU, m.Cores, m.OS, m.Arch))
	item("go", fmt.Sprintf("%s, GOMAXPROCS %d", m.GoVersion, m.GOMAXPROCS))
	item("transport", strings.TrimSpace(m.Transport+" "+paren(m.Device)))
	item("polling", m.Poll)
	item("rdmakit", m.Version)
	item("run", fmt.Sprintf("%s, took %s, quick=%v", m.Timestamp.Format(time.RFC3339), m.Elapsed, m.Quick))
	item("time per point", m.Duration)
	for _, e := range m.Extra {
		k, v, _ := strings.Cut(e, ":")
		item(k, strings.TrimSpace(v))
	}
	b.WriteString("\n")
	b.WriteString(Table(r))
	if len(r.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

// Table renders the result's columns and rows as a Markdown table;
// numeric columns are right-aligned.
func Table(r *Result) string {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range r.Columns {
		b.WriteString(" " + c.Header() + " |")
	}
	b.WriteString("\n|")
	for i := range r.Columns {
		if numericColumn(r, i) {
			b.WriteString(" ---: |")
		} else {
			b.WriteString(" --- |")
		}
	}
	b.WriteString("\n")
	for _, row := range r.Rows {
		b.WriteString("|")
		for _, v := range row {
			b.WriteString(" " + FormatValue(v) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func numericColumn(r *Result, i int) bool {
	for _, row := range r.Rows {
		if _, ok := toFloat(row[i]); ok {
			return true
		}
	}
	return false
}

// FormatValue renders a table value: integers in full, floats with four
// significant digits (no exponent from 1e-4 to 1e9), nil as "—".
func FormatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "—"
	case string:
		return strings.ReplaceAll(x, "|", `\|`)
	case float64:
		return formatFloat(x)
	case float32:
		return formatFloat(float64(x))
	case time.Duration:
		return x.String()
	}
	return fmt.Sprint(v)
}

func formatFloat(x float64) string {
	a := math.Abs(x)
	switch {
	case x == 0:
		return "0"
	case math.IsNaN(x) || math.IsInf(x, 0):
		return strconv.FormatFloat(x, 'g', -1, 64)
	case a >= 1000 && a < 1e9:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a >= 1e-4 && a < 1000:
		digits := 3 - int(math.Floor(math.Log10(a)))
		return strconv.FormatFloat(x, 'f', digits, 64)
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// toFloat converts a numeric value to float64.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint:
		return float64(x), true
	case time.Duration:
		return float64(x), true
	}
	return 0, false
}
