package objstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// The wire between a client and its store: frames of
//
//	type u8 | reqID u32 | len u32 | payload (len bytes)
//
// all little-endian. A request's reply has the request's type with the
// high bit set and the request's reqID; its payload starts with a status
// byte (0 = success, else an error code, see errorCodes). Store-initiated
// frames (hello, notify, lagged) have types of their own.

// Frame types.
const (
	msgCreate    = 1  // id, dataSize u64, metadata (rest) → off u64
	msgSeal      = 2  // id
	msgAbort     = 3  // id
	msgGet       = 4  // timeout i64 ns (<0: forever), n u32, n ids → n × (present u8, off u64, data u64, meta u64)
	msgRelease   = 5  // id
	msgDelete    = 6  // n u32, n ids → n statuses
	msgContains  = 7  // id → present u8
	msgList      = 8  // → n u32, n × (id, data u64, meta u64, sealed u8, refs u32, created i64 ns)
	msgSubscribe = 9  // → (then notify frames with this reqID)
	msgFetch     = 10 // n u32, n ids → n statuses
	msgCancel    = 11 // reqID = the request to cancel; no payload, no reply

	replyBit = 0x80

	msgHello  = 0x40 // store → client, first frame, with the arena fd: version u32, arena u64, maxObject u64
	msgNotify = 0x41 // store → client: reqID = the subscription, id sealed
	msgLagged = 0x42 // store → client: reqID = the subscription, dropped
)

const (
	protocolVersion = 1
	headerSize      = 9
	// MaxMetadataSize bounds an object's metadata (it travels in the
	// Create frame).
	MaxMetadataSize = 1 << 20
	// maxRequestFrame bounds a client's frame payload: a Create with the
	// largest metadata, or a Get/Delete/Fetch of up to maxIDs IDs.
	maxRequestFrame = MaxMetadataSize + 64
	maxIDs          = maxRequestFrame / (IDSize + 1)
	// MaxListObjects bounds the objects one List returns.
	MaxListObjects = 1 << 20
	listEntrySize  = IDSize + 8 + 8 + 1 + 4 + 8
	getEntrySize   = 1 + 8 + 8 + 8
	// maxReplyFrame bounds a store's frame payload (a full List).
	maxReplyFrame = 4 + MaxListObjects*listEntrySize
)

// IDSize is the length of an object ID in bytes.
const IDSize = object.IDSize

// header is a decoded frame header.
type header struct {
	typ   byte
	reqID uint32
	n     uint32
}

// readFrame reads one frame from r into buf (grown when too small) and
// returns its header and payload (aliasing buf). A frame longer than max
// is an error wrapping ErrProtocol, found before anything is allocated.
func readFrame(r io.Reader, buf []byte, max uint32) (header, []byte, []byte, error) {
	var hb [headerSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return header{}, nil, buf, err
	}
	h := header{typ: hb[0], reqID: binary.LittleEndian.Uint32(hb[1:]), n: binary.LittleEndian.Uint32(hb[5:])}
	if h.n > max {
		return h, nil, buf, fmt.Errorf("%w: frame of %d bytes (type %#x) over the limit of %d", ErrProtocol, h.n, h.typ, max)
	}
	if uint32(cap(buf)) < h.n {
		buf = make([]byte, h.n)
	}
	p := buf[:h.n]
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, buf, err
	}
	return h, p, buf, nil
}

// frame is an encoder of one frame: start it, append the payload, finish.
type frame []byte

func newFrame(buf []byte, typ byte, reqID uint32) frame {
	b := append(buf[:0], typ, 0, 0, 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[1:], reqID)
	return b
}

func (f frame) u8(v byte) frame    { return append(f, v) }
func (f frame) u32(v uint32) frame { return binary.LittleEndian.AppendUint32(f, v) }
func (f frame) u64(v uint64) frame { return binary.LittleEndian.AppendUint64(f, v) }
func (f frame) id(id ID) frame     { return append(f, id[:]...) }
func (f frame) bytes(p []byte) frame {
	return append(f, p...)
}
func (f frame) ids(ids []ID) frame {
	f = f.u32(uint32(len(ids)))
	for _, id := range ids {
		f = f.id(id)
	}
	return f
}

// done writes the payload length into the header and returns the frame.
func (f frame) done() []byte {
	binary.LittleEndian.PutUint32(f[5:], uint32(len(f)-headerSize))
	return f
}

// payload decodes a frame's payload; the first short read sets err and
// every later read returns zero, so a decoder checks err once at the end.
type payload struct {
	b   []byte
	err error
}

func (p *payload) fail(what string) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: short or malformed payload (%s)", ErrProtocol, what)
	}
	p.b = nil
}

func (p *payload) u8() byte {
	if len(p.b) < 1 {
		p.fail("u8")
		return 0
	}
	v := p.b[0]
	p.b = p.b[1:]
	return v
}

func (p *payload) u32() uint32 {
	if len(p.b) < 4 {
		p.fail("u32")
		return 0
	}
	v := binary.LittleEndian.Uint32(p.b)
	p.b = p.b[4:]
	return v
}

func (p *payload) u64() uint64 {
	if len(p.b) < 8 {
		p.fail("u64")
		return 0
	}
	v := binary.LittleEndian.Uint64(p.b)
	p.b = p.b[8:]
	return v
}

// size reads a u64 that must be a non-negative int64.
func (p *payload) size() int64 {
	v := p.u64()
	if v > math.MaxInt64 {
		p.fail("size")
		return 0
	}
	return int64(v)
}

func (p *payload) id() (id ID) {
	if len(p.b) < IDSize {
		p.fail("id")
		return id
	}
	copy(id[:], p.b)
	p.b = p.b[IDSize:]
	return id
}

// count reads an entry count and checks that count entries of each bytes
// remain and that count ≤ limit, before anyone allocates for them.
func (p *payload) count(each, limit int) int {
	n := p.u32()
	if p.err != nil {
		return 0
	}
	if int64(n) > int64(limit) || int64(n)*int64(each) > int64(len(p.b)) {
		p.fail(fmt.Sprintf("count %d", n))
		return 0
	}
	return int(n)
}

// ids reads a count and that many IDs, appended to dst.
func (p *payload) ids(dst []ID) []ID {
	n := p.count(IDSize, maxIDs)
	for range n {
		dst = append(dst, p.id())
	}
	return dst
}

// rest returns what is left.
func (p *payload) rest() []byte {
	b := p.b
	p.b = nil
	return b
}

// end checks that nothing is left and returns the first error.
func (p *payload) end() error {
	if p.err == nil && len(p.b) != 0 {
		p.err = fmt.Errorf("%w: %d trailing payload bytes", ErrProtocol, len(p.b))
	}
	return p.err
}

// request is a decoded client request.
type request struct {
	typ      byte
	reqID    uint32
	id       ID
	ids      []ID
	dataSize int64
	meta     []byte // aliases the frame buffer
	timeout  time.Duration
	register func(reqID uint32) // client side: run under the client's lock once reqID is picked
}

// decodeRequest decodes a client frame into r (reusing r.ids). Unknown
// types and malformed payloads are errors wrapping ErrProtocol.
func decodeRequest(h header, b []byte, r *request) error {
	*r = request{typ: h.typ, reqID: h.reqID, ids: r.ids[:0]}
	p := payload{b: b}
	switch h.typ {
	case msgCreate:
		r.id = p.id()
		r.dataSize = p.size()
		r.meta = p.rest()
	case msgSeal, msgAbort, msgRelease, msgContains:
		r.id = p.id()
	case msgGet:
		r.timeout = time.Duration(int64(p.u64()))
		r.ids = p.ids(r.ids)
	case msgDelete, msgFetch:
		r.ids = p.ids(r.ids)
	case msgList, msgSubscribe, msgCancel:
	default:
		return fmt.Errorf("%w: unknown request type %#x", ErrProtocol, h.typ)
	}
	if err := p.end(); err != nil {
		return fmt.Errorf("request type %#x: %w", h.typ, err)
	}
	return nil
}

// encodeRequest encodes r as a frame appended to buf[:0].
func encodeRequest(buf []byte, r *request) []byte {
	f := newFrame(buf, r.typ, r.reqID)
	switch r.typ {
	case msgCreate:
		f = f.id(r.id).u64(uint64(r.dataSize)).bytes(r.meta)
	case msgSeal, msgAbort, msgRelease, msgContains:
		f = f.id(r.id)
	case msgGet:
		f = f.u64(uint64(int64(r.timeout))).ids(r.ids)
	case msgDelete, msgFetch:
		f = f.ids(r.ids)
	}
	return f.done()
}

// encodeList is the reply to a List.
func encodeList(reqID uint32, infos []ObjectInfo) []byte {
	f := newFrame(make([]byte, 0, headerSize+5+len(infos)*listEntrySize), msgList|replyBit, reqID).u8(0).u32(uint32(len(infos)))
	for _, in := range infos {
		sealed := byte(0)
		if in.Sealed {
			sealed = 1
		}
		f = f.id(in.ID).u64(uint64(in.DataSize)).u64(uint64(in.MetadataSize)).u8(sealed).u32(uint32(in.RefCount)).u64(uint64(in.CreatedAt.UnixNano()))
	}
	return f.done()
}

// decodeList decodes a List reply's payload after its status byte.
func decodeList(b []byte) ([]ObjectInfo, error) {
	p := payload{b: b}
	n := p.count(listEntrySize, MaxListObjects)
	infos := make([]ObjectInfo, 0, n)
	for range n {
		in := ObjectInfo{ID: p.id(), DataSize: p.size(), MetadataSize: p.size()}
		in.Sealed = p.u8() == 1
		in.RefCount = int(p.u32())
		in.CreatedAt = time.Unix(0, int64(p.u64()))
		infos = append(infos, in)
	}
	if err := p.end(); err != nil {
		return nil, fmt.Errorf("list reply: %w", err)
	}
	return infos, nil
}
