package workload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"

	"github.com/rdmakit/rdmakit/txn"
)

// TATP is the Telecom Application Transaction Processing benchmark (TATP
// v1.0 spec, as FaRM, FaSST, FORD and Smart-DTX run it): four tables —
// subscriber, access_info (1 to 4 rows per subscriber), special_facility
// (1 to 4 per subscriber) and call_forwarding (0 to 3 per special
// facility) — and seven transactions, 80% of them read-only:
// GET_SUBSCRIBER_DATA 35%, GET_NEW_DESTINATION 10%, GET_ACCESS_DATA 35%,
// UPDATE_SUBSCRIBER_DATA 2%, UPDATE_LOCATION 14%, INSERT_CALL_FORWARDING
// 2%, DELETE_CALL_FORWARDING 2%. Subscriber ids are drawn non-uniformly
// as the spec says (NURand: (rand(0, A) | rand(1, P)) % P + 1, A =
// 65535 up to a million subscribers, 1048575 up to ten million, 2097151
// beyond), or uniformly.
//
// Records are txn keys: "tatp.sub/<s_id>", "tatp.ai/<s_id>/<ai_type>",
// "tatp.sf/<s_id>/<sf_type>" and "tatp.cf/<s_id>/<sf_type>/<start_time>"
// (s_id from 1 to Subscribers), with fixed-width values (TATPSubscriber,
// TATPAccessInfo, TATPSpecialFacility, TATPCallForwarding). The
// transactions that find a subscriber by sub_nbr (UPDATE_LOCATION and
// the call-forwarding ones) need no secondary index: sub_nbr is s_id
// written in 15 decimal digits (as the spec populates it), so it maps
// directly to s_id, as FaRM's and FORD's TATP do; a SQL peer looks it up
// by its sub_nbr index instead.
type TATP struct {
	// Subscribers is the population (default 100,000, the spec's
	// smallest).
	Subscribers int
	// Uniform draws subscriber ids uniformly instead of by NURand.
	Uniform bool
}

// TATPKind is a TATP transaction.
type TATPKind uint8

// TATP's seven transactions.
const (
	// GetSubscriberData reads a subscriber's row (read-only).
	GetSubscriberData TATPKind = iota
	// GetNewDestination reads the forwarding numbers of an active
	// special facility of a subscriber whose time window covers
	// StartTime and ends after EndTime (read-only).
	GetNewDestination
	// GetAccessData reads one access_info row (read-only).
	GetAccessData
	// UpdateSubscriberData sets a subscriber's bit_1 and a special
	// facility's data_a; rejected when the facility does not exist.
	UpdateSubscriberData
	// UpdateLocation sets the vlr_location of the subscriber with SubNbr.
	UpdateLocation
	// InsertCallForwarding adds a call_forwarding row; rejected when the
	// special facility does not exist or the row already does.
	InsertCallForwarding
	// DeleteCallForwarding removes a call_forwarding row; rejected when
	// it does not exist.
	DeleteCallForwarding
	numTATPKinds
)

// tatpNames are the kinds' names as the spec spells them.
var tatpNames = []string{"GET_SUBSCRIBER_DATA", "GET_NEW_DESTINATION", "GET_ACCESS_DATA",
	"UPDATE_SUBSCRIBER_DATA", "UPDATE_LOCATION", "INSERT_CALL_FORWARDING", "DELETE_CALL_FORWARDING"}

// String names the transaction.
func (k TATPKind) String() string {
	if int(k) < len(tatpNames) {
		return tatpNames[k]
	}
	return fmt.Sprintf("TATPKind(%d)", uint8(k))
}

// ReadOnly says whether the transaction writes nothing.
func (k TATPKind) ReadOnly() bool { return k <= GetAccessData }

// tatpMix is the cumulative mix in percent, in kind order.
var tatpMix = [numTATPKinds]int{35, 45, 80, 82, 96, 98, 100}

// TATPOp is one drawn TATP transaction: everything it does. Fields a
// kind does not use are zero.
type TATPOp struct {
	Kind TATPKind
	// SID is the subscriber (1 to Subscribers). UpdateLocation and the
	// call-forwarding transactions name it by SubNbr() instead.
	SID uint64
	// AIType is GetAccessData's ai_type (1 to 4).
	AIType uint8
	// SFType is the special facility's sf_type (1 to 4).
	SFType uint8
	// StartTime (0, 8 or 16) and EndTime (1 to 24): GetNewDestination's
	// window; InsertCallForwarding's new row (EndTime = StartTime + 1 to
	// 8); DeleteCallForwarding's row (StartTime only).
	StartTime, EndTime uint8
	// Bit1 (0 or 1) and DataA (0 to 255): UpdateSubscriberData's values.
	Bit1, DataA uint8
	// VLRLocation is UpdateLocation's new location.
	VLRLocation uint32
	// NumberX is InsertCallForwarding's forwarding number (below 10^15,
	// written as 15 decimal digits).
	NumberX uint64
}

// SubNbr returns the op's subscriber number: SID in 15 decimal digits.
func (op TATPOp) SubNbr() string { return TATPSubNbr(op.SID) }

// TATPSubNbr returns subscriber sid's sub_nbr: sid in 15 decimal digits.
func TATPSubNbr(sid uint64) string { return fmt.Sprintf("%015d", sid) }

// TATP's table names.
const (
	TATPSubscriberTable      = "tatp.sub"
	TATPAccessInfoTable      = "tatp.ai"
	TATPSpecialFacilityTable = "tatp.sf"
	TATPCallForwardingTable  = "tatp.cf"
)

// TATPSubscriberKey returns the key of subscriber sid's row.
func TATPSubscriberKey(sid uint64) []byte { return appendKey(nil, TATPSubscriberTable, sid) }

// TATPAccessInfoKey returns the key of an access_info row.
func TATPAccessInfoKey(sid uint64, aiType uint8) []byte {
	return appendKey(nil, TATPAccessInfoTable, sid, uint64(aiType))
}

// TATPSpecialFacilityKey returns the key of a special_facility row.
func TATPSpecialFacilityKey(sid uint64, sfType uint8) []byte {
	return appendKey(nil, TATPSpecialFacilityTable, sid, uint64(sfType))
}

// TATPCallForwardingKey returns the key of a call_forwarding row.
func TATPCallForwardingKey(sid uint64, sfType, startTime uint8) []byte {
	return appendKey(nil, TATPCallForwardingTable, sid, uint64(sfType), uint64(startTime))
}

// NumSubscribers returns the population (Subscribers, or its default).
func (t *TATP) NumSubscribers() int {
	if t.Subscribers > 0 {
		return t.Subscribers
	}
	return 100_000
}

// Kinds names TATP's transactions, in TATPKind order.
func (t *TATP) Kinds() []string { return tatpNames }

// KindOf returns op's kind as an index in Kinds.
func (t *TATP) KindOf(op TATPOp) int { return int(op.Kind) }

// SID draws a subscriber id, by NURand unless Uniform.
func (t *TATP) SID(r *rand.Rand) uint64 {
	p := uint64(t.NumSubscribers())
	if t.Uniform {
		return 1 + uint64(r.Int63n(int64(p)))
	}
	a := uint64(65535)
	switch {
	case p > 10_000_000:
		a = 2097151
	case p > 1_000_000:
		a = 1048575
	}
	x := uint64(r.Int63n(int64(a) + 1))
	y := 1 + uint64(r.Int63n(int64(p)))
	return (x|y)%p + 1
}

// Next draws a transaction by the standard mix, with the spec's
// parameters.
func (t *TATP) Next(r *rand.Rand) TATPOp {
	p := r.Intn(100)
	op := TATPOp{SID: t.SID(r)}
	for k, c := range tatpMix {
		if p < c {
			op.Kind = TATPKind(k)
			break
		}
	}
	switch op.Kind {
	case GetAccessData:
		op.AIType = uint8(1 + r.Intn(4))
	case GetNewDestination:
		op.SFType = uint8(1 + r.Intn(4))
		op.StartTime = uint8(8 * r.Intn(3))
		op.EndTime = uint8(1 + r.Intn(24))
	case UpdateSubscriberData:
		op.SFType = uint8(1 + r.Intn(4))
		op.Bit1 = uint8(r.Intn(2))
		op.DataA = uint8(r.Intn(256))
	case UpdateLocation:
		op.VLRLocation = r.Uint32()
	case InsertCallForwarding:
		op.SFType = uint8(1 + r.Intn(4))
		op.StartTime = uint8(8 * r.Intn(3))
		op.EndTime = op.StartTime + uint8(1+r.Intn(8))
		op.NumberX = uint64(r.Int63n(1_000_000_000_000_000))
	case DeleteCallForwarding:
		op.SFType = uint8(1 + r.Intn(4))
		op.StartTime = uint8(8 * r.Intn(3))
	}
	return op
}

// Exec runs op on db (txn.Run: retried until it commits). The read-only
// transactions commit whether or not they find their rows; the others
// return an error wrapping ErrRejected where the spec says they fail.
// The delta is always 0.
func (t *TATP) Exec(ctx context.Context, db txn.DB, op TATPOp) (int64, error) {
	if op.Kind >= numTATPKinds || op.SID == 0 {
		return 0, fmt.Errorf("workload: TATP operation %+v is not one Next draws", op)
	}
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		switch op.Kind {
		case GetSubscriberData:
			return found(tx.Get(TATPSubscriberKey(op.SID)))
		case GetNewDestination:
			_, err := getNewDestination(tx, op)
			return err
		case GetAccessData:
			return found(tx.Get(TATPAccessInfoKey(op.SID, op.AIType)))
		case UpdateSubscriberData:
			return updateSubscriberData(tx, op)
		case UpdateLocation:
			return updateSubscriber(tx, op.SID, func(s *TATPSubscriber) { s.VLRLocation = op.VLRLocation })
		case InsertCallForwarding:
			return insertCallForwarding(tx, op)
		default: // DeleteCallForwarding
			return rejectMissing(tx.Delete(TATPCallForwardingKey(op.SID, op.SFType, op.StartTime)))
		}
	})
	if err != nil {
		return 0, fmt.Errorf("workload: TATP %v: %w", op.Kind, err)
	}
	return 0, nil
}

// found drops a read's value and its ErrNotFound: a read-only
// transaction that finds nothing still commits.
func found(_ []byte, err error) error {
	if errors.Is(err, txn.ErrNotFound) {
		return nil
	}
	return err
}

// rejectMissing turns ErrNotFound into a rejection.
func rejectMissing(err error) error {
	if errors.Is(err, txn.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return err
}

// getNewDestination returns the forwarding numbers: SELECT cf.numberx
// FROM special_facility sf, call_forwarding cf WHERE sf.s_id = SID AND
// sf.sf_type = SFType AND sf.is_active = 1 AND cf.s_id = sf.s_id AND
// cf.sf_type = sf.sf_type AND cf.start_time <= StartTime AND EndTime <
// cf.end_time.
func getNewDestination(tx txn.Tx, op TATPOp) ([]uint64, error) {
	v, err := tx.Get(TATPSpecialFacilityKey(op.SID, op.SFType))
	if err != nil {
		return nil, found(nil, err)
	}
	var sf TATPSpecialFacility
	if err := sf.decode(TATPSpecialFacilityKey(op.SID, op.SFType), v); err != nil {
		return nil, err
	}
	if sf.IsActive != 1 {
		return nil, nil
	}
	var numbers []uint64
	for start := uint8(0); start <= op.StartTime; start += 8 {
		key := TATPCallForwardingKey(op.SID, op.SFType, start)
		v, err := tx.Get(key)
		if errors.Is(err, txn.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var cf TATPCallForwarding
		if err := cf.decode(key, v); err != nil {
			return nil, err
		}
		if op.EndTime < cf.EndTime {
			numbers = append(numbers, cf.NumberX)
		}
	}
	return numbers, nil
}

// updateSubscriber rewrites subscriber sid's row with f applied.
func updateSubscriber(tx txn.Tx, sid uint64, f func(*TATPSubscriber)) error {
	key := TATPSubscriberKey(sid)
	v, err := tx.Get(key)
	if err != nil {
		return rejectMissing(err)
	}
	var s TATPSubscriber
	if err := s.decode(key, v); err != nil {
		return err
	}
	f(&s)
	return tx.Put(key, s.Append(nil))
}

// updateSubscriberData: UPDATE subscriber SET bit_1 = Bit1 WHERE s_id =
// SID; UPDATE special_facility SET data_a = DataA WHERE s_id = SID AND
// sf_type = SFType (no such row: the transaction is rejected).
func updateSubscriberData(tx txn.Tx, op TATPOp) error {
	if err := updateSubscriber(tx, op.SID, func(s *TATPSubscriber) { s.Bits = s.Bits&^1 | uint16(op.Bit1&1) }); err != nil {
		return err
	}
	key := TATPSpecialFacilityKey(op.SID, op.SFType)
	v, err := tx.Get(key)
	if err != nil {
		return rejectMissing(err)
	}
	var sf TATPSpecialFacility
	if err := sf.decode(key, v); err != nil {
		return err
	}
	sf.DataA = op.DataA
	return tx.Put(key, sf.Append(nil))
}

// insertCallForwarding: SELECT s_id FROM subscriber WHERE sub_nbr
// (direct: sub_nbr is s_id); SELECT sf_type FROM special_facility WHERE
// s_id (the four possible rows); INSERT INTO call_forwarding, rejected
// when the facility of SFType is missing or the row exists.
func insertCallForwarding(tx txn.Tx, op TATPOp) error {
	if err := found(tx.Get(TATPSubscriberKey(op.SID))); err != nil {
		return err
	}
	have := false
	for sfType := uint8(1); sfType <= 4; sfType++ {
		_, err := tx.Get(TATPSpecialFacilityKey(op.SID, sfType))
		switch {
		case err == nil:
			have = have || sfType == op.SFType
		case !errors.Is(err, txn.ErrNotFound):
			return err
		}
	}
	if !have {
		return fmt.Errorf("%w: subscriber %d has no special facility %d", ErrRejected, op.SID, op.SFType)
	}
	cf := TATPCallForwarding{EndTime: op.EndTime, NumberX: op.NumberX}
	err := tx.Insert(TATPCallForwardingKey(op.SID, op.SFType, op.StartTime), cf.Append(nil))
	if errors.Is(err, txn.ErrExists) {
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return err
}

// TATPSubscriber is a subscriber row (without s_id, its key). Its value
// is 45 bytes: sub_nbr (15 ASCII digits), bit_1 to bit_10 (a 2-byte
// big-endian mask, bit_1 its lowest bit), hex_1 to hex_10 (a byte each,
// 0 to 15), byte2_1 to byte2_10 (a byte each), msc_location and
// vlr_location (4 bytes each, big-endian).
type TATPSubscriber struct {
	SubNbr      [15]byte
	Bits        uint16
	Hex         [10]uint8
	Byte2       [10]uint8
	MSCLocation uint32
	VLRLocation uint32
}

// tatpSubscriberSize is a subscriber value's bytes.
const tatpSubscriberSize = 15 + 2 + 10 + 10 + 4 + 4

// Append appends the row's value.
func (s *TATPSubscriber) Append(dst []byte) []byte {
	dst = append(dst, s.SubNbr[:]...)
	dst = binary.BigEndian.AppendUint16(dst, s.Bits)
	dst = append(dst, s.Hex[:]...)
	dst = append(dst, s.Byte2[:]...)
	dst = binary.BigEndian.AppendUint32(dst, s.MSCLocation)
	return binary.BigEndian.AppendUint32(dst, s.VLRLocation)
}

// decode reads key's value.
func (s *TATPSubscriber) decode(key, v []byte) error {
	if len(v) != tatpSubscriberSize {
		return corrupt(key, len(v), tatpSubscriberSize)
	}
	copy(s.SubNbr[:], v)
	s.Bits = binary.BigEndian.Uint16(v[15:])
	copy(s.Hex[:], v[17:])
	copy(s.Byte2[:], v[27:])
	s.MSCLocation = binary.BigEndian.Uint32(v[37:])
	s.VLRLocation = binary.BigEndian.Uint32(v[41:])
	return nil
}

// TATPAccessInfo is an access_info row (without s_id and ai_type, its
// key). Its value is 10 bytes: data1, data2, data3 (3 ASCII letters) and
// data4 (5 ASCII letters).
type TATPAccessInfo struct {
	Data1, Data2 uint8
	Data3        [3]byte
	Data4        [5]byte
}

// Append appends the row's value.
func (a *TATPAccessInfo) Append(dst []byte) []byte {
	dst = append(dst, a.Data1, a.Data2)
	dst = append(dst, a.Data3[:]...)
	return append(dst, a.Data4[:]...)
}

// TATPSpecialFacility is a special_facility row (without s_id and
// sf_type). Its value is 8 bytes: is_active (0 or 1), error_cntrl,
// data_a, data_b (5 ASCII letters).
type TATPSpecialFacility struct {
	IsActive, ErrorCntrl, DataA uint8
	DataB                       [5]byte
}

// Append appends the row's value.
func (f *TATPSpecialFacility) Append(dst []byte) []byte {
	dst = append(dst, f.IsActive, f.ErrorCntrl, f.DataA)
	return append(dst, f.DataB[:]...)
}

// decode reads key's value.
func (f *TATPSpecialFacility) decode(key, v []byte) error {
	if len(v) != 8 {
		return corrupt(key, len(v), 8)
	}
	f.IsActive, f.ErrorCntrl, f.DataA = v[0], v[1], v[2]
	copy(f.DataB[:], v[3:])
	return nil
}

// TATPCallForwarding is a call_forwarding row (without s_id, sf_type
// and start_time). Its value is 9 bytes: end_time, numberx (8 bytes,
// big-endian; the spec's 15-digit string is this number in decimal).
type TATPCallForwarding struct {
	EndTime uint8
	NumberX uint64
}

// Append appends the row's value.
func (c *TATPCallForwarding) Append(dst []byte) []byte {
	return binary.BigEndian.AppendUint64(append(dst, c.EndTime), c.NumberX)
}

// decode reads key's value.
func (c *TATPCallForwarding) decode(key, v []byte) error {
	if len(v) != 9 {
		return corrupt(key, len(v), 9)
	}
	c.EndTime = v[0]
	c.NumberX = binary.BigEndian.Uint64(v[1:])
	return nil
}

// TATPRows is one subscriber's rows as the spec populates them.
type TATPRows struct {
	SID               uint64
	Subscriber        TATPSubscriber
	AccessInfo        map[uint8]TATPAccessInfo      // by ai_type
	SpecialFacilities map[uint8]TATPSpecialFacility // by sf_type
	// CallForwarding by sf_type then start_time.
	CallForwarding map[uint8]map[uint8]TATPCallForwarding
}

// Rows draws subscriber sid's population with r: sub_nbr = sid in 15
// digits; random bits, hexes, bytes and locations; 1 to 4 access_info
// rows of distinct ai_types; 1 to 4 special facilities of distinct
// sf_types, 85% of them active; 0 to 3 call_forwarding rows per facility
// with distinct start_times (0, 8, 16) and end_time = start_time + 1 to
// 8.
func (t *TATP) Rows(sid uint64, r *rand.Rand) TATPRows {
	rows := TATPRows{SID: sid, AccessInfo: map[uint8]TATPAccessInfo{},
		SpecialFacilities: map[uint8]TATPSpecialFacility{}, CallForwarding: map[uint8]map[uint8]TATPCallForwarding{}}
	s := &rows.Subscriber
	copy(s.SubNbr[:], TATPSubNbr(sid))
	s.Bits = uint16(r.Intn(1 << 10))
	for i := range s.Hex {
		s.Hex[i] = uint8(r.Intn(16))
		s.Byte2[i] = uint8(r.Intn(256))
	}
	s.MSCLocation, s.VLRLocation = r.Uint32(), r.Uint32()
	for _, ai := range r.Perm(4)[:1+r.Intn(4)] {
		a := TATPAccessInfo{Data1: uint8(r.Intn(256)), Data2: uint8(r.Intn(256))}
		letters(r, a.Data3[:])
		letters(r, a.Data4[:])
		rows.AccessInfo[uint8(ai+1)] = a
	}
	for _, sf := range r.Perm(4)[:1+r.Intn(4)] {
		f := TATPSpecialFacility{ErrorCntrl: uint8(r.Intn(256)), DataA: uint8(r.Intn(256))}
		if r.Intn(100) < 85 {
			f.IsActive = 1
		}
		letters(r, f.DataB[:])
		rows.SpecialFacilities[uint8(sf+1)] = f
		cfs := map[uint8]TATPCallForwarding{}
		for _, st := range r.Perm(3)[:r.Intn(4)] {
			start := uint8(8 * st)
			cfs[start] = TATPCallForwarding{EndTime: start + uint8(1+r.Intn(8)), NumberX: uint64(r.Int63n(1_000_000_000_000_000))}
		}
		rows.CallForwarding[uint8(sf+1)] = cfs
	}
	return rows
}

// letters fills b with random upper-case ASCII letters.
func letters(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = 'A' + byte(r.Intn(26))
	}
}
