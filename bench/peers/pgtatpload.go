package peers

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/workload"
)

// tatpRows is a txn.DB that keeps what workload.TATP.Load writes as rows
// of PostgreSQL's four tables, ready for COPY: the SQL peer loads exactly
// the population the workload gives rdmakit's protocols, whatever rule
// the loader follows to draw it. Its transactions only write; reads find
// nothing.
type tatpRows struct {
	mu     sync.Mutex
	tables [4][][]any // subscriber, access_info, special_facility, call_forwarding
}

// TATP's tables in tatpRows.tables order, with the record keys' table
// names and the number of ids in their keys.
var tatpTables = [4]struct {
	name, key string
	ids       int
	cols      []string
}{
	{"subscriber", workload.TATPSubscriberTable, 1, tatpSubscriberCols},
	{"access_info", workload.TATPAccessInfoTable, 2, []string{"s_id", "ai_type", "data1", "data2", "data3", "data4"}},
	{"special_facility", workload.TATPSpecialFacilityTable, 2, []string{"s_id", "sf_type", "is_active", "error_cntrl", "data_a", "data_b"}},
	{"call_forwarding", workload.TATPCallForwardingTable, 3, []string{"s_id", "sf_type", "start_time", "end_time", "numberx"}},
}

// Begin starts a transaction that buffers its rows until Commit.
func (d *tatpRows) Begin(context.Context) (txn.Tx, error) { return &tatpRowsTx{d: d}, nil }

// Close does nothing.
func (d *tatpRows) Close() error { return nil }

// tatpRowsTx is a tatpRows transaction.
type tatpRowsTx struct {
	d      *tatpRows
	tables [4][][]any
}

// Get finds nothing: loading only writes.
func (t *tatpRowsTx) Get(key []byte) ([]byte, error) {
	return nil, fmt.Errorf("%w: %q (a load reads nothing)", txn.ErrNotFound, key)
}

// Put turns the record into its table's row.
func (t *tatpRowsTx) Put(key, value []byte) error {
	table, row, err := tatpRow(key, value)
	if err != nil {
		return err
	}
	t.tables[table] = append(t.tables[table], row)
	return nil
}

// Insert is Put: a load writes each record once.
func (t *tatpRowsTx) Insert(key, value []byte) error { return t.Put(key, value) }

// Delete finds nothing.
func (t *tatpRowsTx) Delete(key []byte) error { _, err := t.Get(key); return err }

// Commit hands the rows to the DB.
func (t *tatpRowsTx) Commit() error {
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	for i, rows := range t.tables {
		t.d.tables[i] = append(t.d.tables[i], rows...)
	}
	t.tables = [4][][]any{}
	return nil
}

// Abort drops the rows.
func (t *tatpRowsTx) Abort() { t.tables = [4][][]any{} }

// tatpRow decodes a TATP record (key and value as the workload writes
// them: see workload.TATPSubscriber and the others) into its table's index
// and row. A record of another shape is an error wrapping
// workload.ErrCorrupt.
func tatpRow(key, value []byte) (int, []any, error) {
	name, rest, _ := strings.Cut(string(key), "/")
	for i, t := range tatpTables {
		if t.key != name {
			continue
		}
		ids := strings.Split(rest, "/")
		if len(ids) != t.ids {
			break
		}
		n := make([]int64, len(ids))
		for j, id := range ids {
			v, err := strconv.ParseUint(id, 10, 31)
			if err != nil {
				return 0, nil, &workload.CorruptError{Key: string(key), Size: len(value)}
			}
			n[j] = int64(v)
		}
		row, want := tatpValue(i, n, value)
		if row == nil {
			return 0, nil, &workload.CorruptError{Key: string(key), Size: len(value), Want: want}
		}
		return i, row, nil
	}
	return 0, nil, &workload.CorruptError{Key: string(key), Size: len(value)}
}

// tatpValue decodes the value of table i's record with ids into a row,
// or returns nil and the size the value should have.
func tatpValue(i int, ids []int64, v []byte) ([]any, int) {
	sid := int32(ids[0])
	switch i {
	case 0:
		if len(v) != 45 {
			return nil, 45
		}
		var s workload.TATPSubscriber
		copy(s.SubNbr[:], v)
		s.Bits = binary.BigEndian.Uint16(v[15:])
		copy(s.Hex[:], v[17:27])
		copy(s.Byte2[:], v[27:37])
		s.MSCLocation = binary.BigEndian.Uint32(v[37:])
		s.VLRLocation = binary.BigEndian.Uint32(v[41:])
		return subscriberRow(sid, &s), 0
	case 1:
		if len(v) != 10 {
			return nil, 10
		}
		return []any{sid, int16(ids[1]), int16(v[0]), int16(v[1]), string(v[2:5]), string(v[5:10])}, 0
	case 2:
		if len(v) != 8 {
			return nil, 8
		}
		return []any{sid, int16(ids[1]), int16(v[0]), int16(v[1]), int16(v[2]), string(v[3:8])}, 0
	default:
		if len(v) != 9 {
			return nil, 9
		}
		return []any{sid, int16(ids[1]), int16(ids[2]), int16(v[0]), numberX(binary.BigEndian.Uint64(v[1:]))}, 0
	}
}
