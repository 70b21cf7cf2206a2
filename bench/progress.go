package bench

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
)

// Progress is a progress bar; the zero value and a hidden bar do
// nothing.
type Progress struct {
	bar *progressbar.ProgressBar
}

func newProgress(w io.Writer, total int, description string, show bool) *Progress {
	if !show || w == nil {
		return &Progress{}
	}
	return &Progress{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(description),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	)}
}

// Add advances the bar by n steps.
func (p *Progress) Add(n int) {
	if p != nil && p.bar != nil {
		_ = p.bar.Add(n)
	}
}

// Describe changes the text shown before the bar.
func (p *Progress) Describe(s string) {
	if p != nil && p.bar != nil {
		p.bar.Describe(s)
	}
}

// Finish completes and clears the bar.
func (p *Progress) Finish() {
	if p != nil && p.bar != nil {
		_ = p.bar.Finish()
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
