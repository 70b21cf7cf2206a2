package sock

// byteRing is a FIFO of bytes that grows by doubling up to what it must
// hold (flow control bounds that).
type byteRing struct {
	buf        []byte
	head, size int
}

func (r *byteRing) len() int { return r.size }

// write appends p, growing the ring if needed.
func (r *byteRing) write(p []byte) {
	if r.size+len(p) > len(r.buf) {
		r.grow(r.size + len(p))
	}
	tail := (r.head + r.size) % len(r.buf)
	n := copy(r.buf[tail:], p)
	copy(r.buf, p[n:])
	r.size += len(p)
}

// read moves up to len(p) bytes into p.
func (r *byteRing) read(p []byte) int {
	a, b := r.peek(len(p))
	n := copy(p, a)
	n += copy(p[n:], b)
	r.discard(n)
	return n
}

// peek returns up to n bytes at the head as two slices (the second when the
// bytes wrap), without consuming them.
func (r *byteRing) peek(n int) ([]byte, []byte) {
	n = min(n, r.size)
	if n == 0 {
		return nil, nil
	}
	end := r.head + n
	if end <= len(r.buf) {
		return r.buf[r.head:end], nil
	}
	return r.buf[r.head:], r.buf[:end-len(r.buf)]
}

func (r *byteRing) discard(n int) {
	r.head = (r.head + n) % max(len(r.buf), 1)
	r.size -= n
	if r.size == 0 {
		r.head = 0
	}
}

func (r *byteRing) grow(need int) {
	c := max(len(r.buf)*2, 4096)
	for c < need {
		c *= 2
	}
	nb := make([]byte, c)
	a, b := r.peek(r.size)
	copy(nb[copy(nb, a):], b)
	r.buf, r.head = nb, 0
}

// shrink frees the buffer when it is empty and larger than keep.
func (r *byteRing) shrink(keep int) {
	if r.size == 0 && len(r.buf) > keep {
		r.buf, r.head = nil, 0
	}
}
