package txnexp

import "github.com/rdmakit/rdmakit/check"

// doublingCheck checks a history that grows point after point without
// re-checking all of it after every point: it checks when the history
// has at least doubled since its last check (so the total checking work
// stays within a small multiple of one check of the final history,
// where a check after every point is quadratic in the points), and
// always at the end (final). Checked is the transactions found
// serializable so far.
type doublingCheck struct {
	h       *check.History
	checked int
}

// maybe checks the history if it has doubled since the last check and
// returns the transactions checked so far.
func (d *doublingCheck) maybe() (int, error) {
	if n := d.h.Len(); n >= 2*d.checked {
		return d.final()
	}
	return d.checked, nil
}

// final checks the whole history.
func (d *doublingCheck) final() (int, error) {
	n := d.h.Len()
	if err := d.h.Check(); err != nil {
		return d.checked, err
	}
	d.checked = n
	return n, nil
}
