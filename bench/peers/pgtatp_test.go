package peers

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rdmakit/rdmakit/txn/txntest"
	"github.com/rdmakit/rdmakit/workload"
)

// tatpDump reads PostgreSQL's TATP back as the workload's records.
func tatpDump(t *testing.T, db *PGTxn) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	query(t, db, "SELECT "+tatpSubscriberColumns()+" FROM subscriber", func(rows pgx.Rows) error {
		var sid int32
		var nbr string
		var small [30]int16
		var msc, vlr int64
		dst := []any{&sid, &nbr}
		for i := range small {
			dst = append(dst, &small[i])
		}
		if err := rows.Scan(append(dst, &msc, &vlr)...); err != nil {
			return err
		}
		var s workload.TATPSubscriber
		copy(s.SubNbr[:], nbr)
		for i := range 10 {
			s.Bits |= uint16(small[i]&1) << i
			s.Hex[i] = uint8(small[10+i])
			s.Byte2[i] = uint8(small[20+i])
		}
		s.MSCLocation, s.VLRLocation = uint32(msc), uint32(vlr)
		out[string(workload.TATPSubscriberKey(uint64(sid)))] = s.Append(nil)
		return nil
	})
	query(t, db, "SELECT s_id, ai_type, data1, data2, data3, data4 FROM access_info", func(rows pgx.Rows) error {
		var sid int32
		var typ, d1, d2 int16
		var d3, d4 string
		if err := rows.Scan(&sid, &typ, &d1, &d2, &d3, &d4); err != nil {
			return err
		}
		a := workload.TATPAccessInfo{Data1: uint8(d1), Data2: uint8(d2)}
		copy(a.Data3[:], d3)
		copy(a.Data4[:], d4)
		out[string(workload.TATPAccessInfoKey(uint64(sid), uint8(typ)))] = a.Append(nil)
		return nil
	})
	query(t, db, "SELECT s_id, sf_type, is_active, error_cntrl, data_a, data_b FROM special_facility", func(rows pgx.Rows) error {
		var sid int32
		var typ, active, errc, dataA int16
		var dataB string
		if err := rows.Scan(&sid, &typ, &active, &errc, &dataA, &dataB); err != nil {
			return err
		}
		f := workload.TATPSpecialFacility{IsActive: uint8(active), ErrorCntrl: uint8(errc), DataA: uint8(dataA)}
		copy(f.DataB[:], dataB)
		out[string(workload.TATPSpecialFacilityKey(uint64(sid), uint8(typ)))] = f.Append(nil)
		return nil
	})
	query(t, db, "SELECT s_id, sf_type, start_time, end_time, numberx FROM call_forwarding", func(rows pgx.Rows) error {
		var sid int32
		var typ, start, end int16
		var nx string
		if err := rows.Scan(&sid, &typ, &start, &end, &nx); err != nil {
			return err
		}
		n, err := strconv.ParseUint(nx, 10, 64)
		if err != nil || len(nx) != 15 {
			t.Errorf("numberx %q is not 15 digits", nx)
		}
		c := workload.TATPCallForwarding{EndTime: uint8(end), NumberX: n}
		out[string(workload.TATPCallForwardingKey(uint64(sid), uint8(typ), uint8(start)))] = c.Append(nil)
		return nil
	})
	return out
}

// tatpSubscriberColumns lists subscriber's columns for a SELECT.
func tatpSubscriberColumns() string {
	s := ""
	for i, c := range tatpSubscriberCols {
		if i > 0 {
			s += ", "
		}
		s += c
	}
	return s
}

// query runs sql and calls each for every row.
func query(t *testing.T, db *PGTxn, sql string, each func(pgx.Rows) error) {
	t.Helper()
	rows, err := db.Pool().Query(t.Context(), sql)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			t.Fatal(err)
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
}

func TestPGTATP(t *testing.T) {
	needPostgres(t)
	db := startPGTxn(t, 8)
	ctx := t.Context()
	w := &workload.TATP{Subscribers: 300}
	cfg := workload.TxnLoad{Seed: 7}

	// The population and the same operations on the workload's own Exec
	// (over a trivially serializable store) and on PostgreSQL give the
	// same rejections and the same records.
	t.Run("like-for-like", func(t *testing.T) {
		p, err := LoadPGTATP(ctx, db, w, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ref := txntest.NewMemDB()
		if err := w.Load(ctx, ref, cfg); err != nil {
			t.Fatal(err)
		}
		// Every record a subscriber may have.
		var keys [][]byte
		for sid := uint64(1); sid <= uint64(w.NumSubscribers()); sid++ {
			keys = append(keys, workload.TATPSubscriberKey(sid))
			for typ := uint8(1); typ <= 4; typ++ {
				keys = append(keys, workload.TATPAccessInfoKey(sid, typ), workload.TATPSpecialFacilityKey(sid, typ))
				for start := uint8(0); start <= 16; start += 8 {
					keys = append(keys, workload.TATPCallForwardingKey(sid, typ, start))
				}
			}
		}
		sameData(t, readAll(t, ref, keys), tatpDump(t, db))
		if t.Failed() {
			t.FailNow()
		}
		committed, rejected := sameOutcome(t, w, draw(w, 4000, 5),
			func(ctx context.Context, op workload.TATPOp) (int64, error) { return w.Exec(ctx, ref, op) },
			func(ctx context.Context, op workload.TATPOp) (int64, error) { return p.Exec(ctx, nil, op) })
		sameData(t, readAll(t, ref, keys), tatpDump(t, db))
		for k, name := range w.Kinds() {
			if committed[k] == 0 {
				t.Errorf("no %s committed", name)
			}
		}
		for _, k := range []workload.TATPKind{workload.UpdateSubscriberData, workload.InsertCallForwarding, workload.DeleteCallForwarding} {
			if rejected[k] == 0 {
				t.Errorf("no %v rejected: the test does not reach that path", k)
			}
		}
		t.Logf("committed %v, rejected %v", committed, rejected)
	})

	t.Run("kinds", func(t *testing.T) {
		p, err := LoadPGTATP(ctx, db, w, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Subscriber 1's facilities, from the population.
		var sf int16
		if err := db.Pool().QueryRow(ctx, "SELECT min(sf_type) FROM special_facility WHERE s_id = 1").Scan(&sf); err != nil {
			t.Fatal(err)
		}
		var start int16
		err = db.Pool().QueryRow(ctx, "SELECT s FROM generate_series(0, 16, 8) s WHERE NOT EXISTS "+
			"(SELECT 1 FROM call_forwarding WHERE s_id = 1 AND sf_type = $1 AND start_time = s) LIMIT 1", sf).Scan(&start)
		if err != nil {
			t.Fatalf("no free start time for subscriber 1's facility %d: %v", sf, err)
		}
		ins := workload.TATPOp{Kind: workload.InsertCallForwarding, SID: 1, SFType: uint8(sf), StartTime: uint8(start), EndTime: uint8(start) + 3, NumberX: 123456789}
		del := workload.TATPOp{Kind: workload.DeleteCallForwarding, SID: 1, SFType: uint8(sf), StartTime: uint8(start)}
		upd := workload.TATPOp{Kind: workload.UpdateLocation, SID: 1, VLRLocation: 4_000_000_000}
		for i, s := range []struct {
			op       workload.TATPOp
			rejected bool
		}{
			{ins, false}, {ins, true}, {del, false}, {del, true}, {upd, false},
			{workload.TATPOp{Kind: workload.UpdateSubscriberData, SID: 1, SFType: uint8(sf), Bit1: 1, DataA: 77}, false},
			{workload.TATPOp{Kind: workload.GetSubscriberData, SID: 1}, false},
			{workload.TATPOp{Kind: workload.GetAccessData, SID: 1, AIType: 1}, false},
			{workload.TATPOp{Kind: workload.GetNewDestination, SID: 1, SFType: uint8(sf), StartTime: 16, EndTime: 1}, false},
		} {
			if _, err := p.Exec(ctx, nil, s.op); errors.Is(err, workload.ErrRejected) != s.rejected || err != nil && !s.rejected {
				t.Errorf("step %d %v: %v, want rejected %v", i, s.op.Kind, err, s.rejected)
			}
		}
		var vlr int64
		var bit1, dataA int16
		if err := db.Pool().QueryRow(ctx, "SELECT vlr_location, bit_1, data_a FROM subscriber JOIN special_facility USING (s_id) WHERE s_id = 1 AND sf_type = $1", sf).Scan(&vlr, &bit1, &dataA); err != nil {
			t.Fatal(err)
		}
		if vlr != 4_000_000_000 || bit1 != 1 || dataA != 77 {
			t.Errorf("subscriber 1: vlr_location %d, bit_1 %d, data_a %d; want 4000000000, 1, 77", vlr, bit1, dataA)
		}
		for _, op := range []workload.TATPOp{{Kind: 9, SID: 1}, {Kind: workload.GetSubscriberData}, {Kind: workload.GetSubscriberData, SID: 301}} {
			if _, err := p.Exec(ctx, nil, op); err == nil {
				t.Errorf("operation %+v ran", op)
			}
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		p, err := LoadPGTATP(ctx, db, w, cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := workload.RunTxnFunc(ctx, workload.TxnRun{Threads: 8, Duration: time.Second, Seed: 3}, w, p.Exec)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d committed (%.0f/s), %d rejected, aborts %v, p50 %v p99 %v", res.Committed, res.Rate(), res.Rejected, res.Aborts, res.P50, res.P99)
		if res.Failed != 0 || res.Unknown != 0 {
			t.Fatalf("%d failed, %d unknown: %v", res.Failed, res.Unknown, res.FirstErr)
		}
		for _, k := range res.Kinds[:3] {
			if k.Committed == 0 {
				t.Errorf("no %s committed", k.Name)
			}
		}
		// Every call_forwarding row still has its special facility.
		var orphans int
		if err := db.Pool().QueryRow(ctx, "SELECT count(*) FROM call_forwarding cf WHERE NOT EXISTS "+
			"(SELECT 1 FROM special_facility sf WHERE sf.s_id = cf.s_id AND sf.sf_type = cf.sf_type)").Scan(&orphans); err != nil || orphans != 0 {
			t.Errorf("%d call forwardings without their facility (%v)", orphans, err)
		}
	})
}

func TestTATPRowRejectsOtherRecords(t *testing.T) {
	good := (&workload.TATPSpecialFacility{IsActive: 1}).Append(nil)
	if table, row, err := tatpRow(workload.TATPSpecialFacilityKey(3, 2), good); err != nil || table != 2 || len(row) != 6 {
		t.Fatalf("a special facility: table %d, row %v, %v", table, row, err)
	}
	for _, r := range []struct{ key, value string }{
		{"tatp.sf/3/2", "short"},
		{"tatp.sf/3", string(good)},
		{"tatp.sf/3/x", string(good)},
		{"tatp.sf/3/2/1", string(good)},
		{"sb.chk/3", string(good)},
		{"tatp.sub/99999999999", string(make([]byte, 45))},
		{"", ""},
	} {
		if _, _, err := tatpRow([]byte(r.key), []byte(r.value)); !errors.Is(err, workload.ErrCorrupt) {
			t.Errorf("record %q (%d bytes): %v, want ErrCorrupt", r.key, len(r.value), err)
		}
	}
}
