package workload_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand"
	"testing"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/txntest"
	"github.com/rdmakit/rdmakit/workload"
)

// TestTATPNext: the standard mix (80% read-only) and parameters in the
// spec's ranges; NURand skews subscriber ids, Uniform does not.
func TestTATPNext(t *testing.T) {
	tp := &workload.TATP{}
	r := rand.New(rand.NewSource(2))
	const n = 200_000
	var kinds [7]int
	readOnly := 0
	for range n {
		op := tp.Next(r)
		kinds[op.Kind]++
		if op.Kind.ReadOnly() {
			readOnly++
		}
		bad := op.SID < 1 || op.SID > 100_000
		switch op.Kind {
		case workload.GetAccessData:
			bad = bad || op.AIType < 1 || op.AIType > 4
		case workload.GetNewDestination:
			bad = bad || op.SFType < 1 || op.SFType > 4 || op.StartTime%8 != 0 || op.StartTime > 16 || op.EndTime < 1 || op.EndTime > 24
		case workload.UpdateSubscriberData:
			bad = bad || op.SFType < 1 || op.SFType > 4 || op.Bit1 > 1
		case workload.InsertCallForwarding:
			bad = bad || op.StartTime%8 != 0 || op.StartTime > 16 || op.EndTime <= op.StartTime || op.EndTime > op.StartTime+8 ||
				op.NumberX >= 1e15
		case workload.DeleteCallForwarding:
			bad = bad || op.SFType < 1 || op.SFType > 4 || op.StartTime%8 != 0 || op.StartTime > 16
		}
		if bad {
			t.Fatalf("%+v: out of the spec's ranges", op)
		}
	}
	for k, want := range []float64{0.35, 0.10, 0.35, 0.02, 0.14, 0.02, 0.02} {
		near(t, workload.TATPKind(k).String(), float64(kinds[k])/n, want, 0.005)
	}
	near(t, "read-only", float64(readOnly)/n, 0.8, 0.005)
	if (workload.TATPOp{SID: 42}).SubNbr() != "000000000000042" {
		t.Fatal("sub_nbr is not s_id in 15 digits")
	}

	// NURand: (rand(0, 65535) | rand(1, P)) % P + 1 favours ids with
	// many low bits set; the spread between the most and least drawn of
	// 16 buckets shows it.
	spread := func(tp *workload.TATP) float64 {
		var b [16]int
		for range n {
			b[(tp.SID(r)-1)*16/100_000]++
		}
		lo, hi := b[0], b[0]
		for _, c := range b {
			lo, hi = min(lo, c), max(hi, c)
		}
		return float64(hi) / float64(lo)
	}
	if s := spread(&workload.TATP{}); s < 1.5 {
		t.Errorf("NURand ids spread %.2f between buckets, want a skew", s)
	}
	if s := spread(&workload.TATP{Uniform: true}); s > 1.1 {
		t.Errorf("uniform ids spread %.2f between buckets", s)
	}
}

// TestTATPRows: the population's shape as the spec says.
func TestTATPRows(t *testing.T) {
	tp := &workload.TATP{}
	r := rand.New(rand.NewSource(3))
	var ai, sf, cf, active int
	const n = 2000
	for sid := uint64(1); sid <= n; sid++ {
		rows := tp.Rows(sid, r)
		if string(rows.Subscriber.SubNbr[:]) != workload.TATPSubNbr(sid) || rows.Subscriber.Bits >= 1<<10 {
			t.Fatalf("subscriber %d: %+v", sid, rows.Subscriber)
		}
		if len(rows.AccessInfo) < 1 || len(rows.AccessInfo) > 4 || len(rows.SpecialFacilities) < 1 || len(rows.SpecialFacilities) > 4 {
			t.Fatalf("subscriber %d: %d access_info, %d special_facility rows", sid, len(rows.AccessInfo), len(rows.SpecialFacilities))
		}
		for typ := range rows.AccessInfo {
			if typ < 1 || typ > 4 {
				t.Fatalf("ai_type %d", typ)
			}
		}
		for typ, f := range rows.SpecialFacilities {
			if typ < 1 || typ > 4 || f.IsActive > 1 || len(rows.CallForwarding[typ]) > 3 {
				t.Fatalf("sf_type %d: %+v with %d call forwardings", typ, f, len(rows.CallForwarding[typ]))
			}
			active += int(f.IsActive)
			for start, c := range rows.CallForwarding[typ] {
				if start%8 != 0 || start > 16 || c.EndTime <= start || c.EndTime > start+8 || c.NumberX >= 1e15 {
					t.Fatalf("call forwarding at %d: %+v", start, c)
				}
			}
			cf += len(rows.CallForwarding[typ])
		}
		ai += len(rows.AccessInfo)
		sf += len(rows.SpecialFacilities)
	}
	near(t, "access_info per subscriber", float64(ai)/n, 2.5, 0.1)
	near(t, "special_facility per subscriber", float64(sf)/n, 2.5, 0.1)
	near(t, "call_forwarding per facility", float64(cf)/float64(sf), 1.5, 0.1)
	near(t, "active facilities", float64(active)/float64(sf), 0.85, 0.03)
}

// tatpDB loads 20 subscribers one per transaction with seed 5, so that
// subscriber s's rows are Rows(s, rand.NewSource(5 + s - 1)).
func tatpDB(t *testing.T) (*workload.TATP, txn.DB, func(sid uint64) workload.TATPRows) {
	tp := &workload.TATP{Subscribers: 20}
	db := txntest.NewMemDB()
	if err := tp.Load(context.Background(), db, workload.TxnLoad{Batch: 1, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	return tp, db, func(sid uint64) workload.TATPRows {
		return tp.Rows(sid, rand.New(rand.NewSource(5+int64(sid)-1)))
	}
}

// get reads a key, nil if missing.
func get(t *testing.T, db txn.DB, key []byte) []byte {
	t.Helper()
	var v []byte
	err := txn.Run(context.Background(), db, func(tx txn.Tx) error {
		var err error
		v, err = tx.Get(key)
		if errors.Is(err, txn.ErrNotFound) {
			v, err = nil, nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTATPExec: the updates, inserts and deletes change what the spec
// says, and are rejected where it says they fail.
func TestTATPExec(t *testing.T) {
	tp, db, rows := tatpDB(t)
	ctx := context.Background()
	exec := func(op workload.TATPOp) error {
		t.Helper()
		_, err := tp.Exec(ctx, db, op)
		return err
	}
	// Find a subscriber with a facility type it lacks and one it has
	// without a call forwarding at 0.
	var sid uint64
	var have, lack uint8
	for s := uint64(1); s <= 20 && sid == 0; s++ {
		rs := rows(s)
		for typ := uint8(1); typ <= 4; typ++ {
			if _, ok := rs.SpecialFacilities[typ]; !ok {
				lack = typ
			} else if _, ok := rs.CallForwarding[typ][0]; !ok {
				have = typ
			}
		}
		if have != 0 && lack != 0 {
			sid = s
		} else {
			have, lack = 0, 0
		}
	}
	if sid == 0 {
		t.Fatal("no subscriber fits the test")
	}
	if v := get(t, db, workload.TATPSubscriberKey(sid)); v == nil || string(v[:15]) != workload.TATPSubNbr(sid) {
		t.Fatalf("the load did not write subscriber %d as Rows draws it: %q", sid, v)
	}
	for k := workload.GetSubscriberData; k <= workload.GetAccessData; k++ {
		if err := exec(workload.TATPOp{Kind: k, SID: sid, AIType: 4, SFType: lack, StartTime: 16, EndTime: 1}); err != nil {
			t.Fatalf("%v: %v", k, err)
		}
	}

	if err := exec(workload.TATPOp{Kind: workload.UpdateLocation, SID: sid, VLRLocation: 77}); err != nil {
		t.Fatal(err)
	}
	if v := get(t, db, workload.TATPSubscriberKey(sid)); binary.BigEndian.Uint32(v[41:]) != 77 {
		t.Fatalf("vlr_location %d after UPDATE_LOCATION, want 77", binary.BigEndian.Uint32(v[41:]))
	}

	before := get(t, db, workload.TATPSubscriberKey(sid))
	if err := exec(workload.TATPOp{Kind: workload.UpdateSubscriberData, SID: sid, SFType: lack, Bit1: 1 - before[16]&1, DataA: 9}); !errors.Is(err, workload.ErrRejected) {
		t.Fatalf("UPDATE_SUBSCRIBER_DATA of a missing facility: %v, want a rejection", err)
	}
	if string(get(t, db, workload.TATPSubscriberKey(sid))) != string(before) {
		t.Fatal("a rejected UPDATE_SUBSCRIBER_DATA changed the subscriber")
	}
	if err := exec(workload.TATPOp{Kind: workload.UpdateSubscriberData, SID: sid, SFType: have, Bit1: 1 - before[16]&1, DataA: 9}); err != nil {
		t.Fatal(err)
	}
	if v := get(t, db, workload.TATPSubscriberKey(sid)); v[16]&1 != 1-before[16]&1 {
		t.Fatal("bit_1 unchanged")
	}
	if v := get(t, db, workload.TATPSpecialFacilityKey(sid, have)); v[2] != 9 {
		t.Fatalf("data_a %d, want 9", v[2])
	}

	ins := workload.TATPOp{Kind: workload.InsertCallForwarding, SID: sid, SFType: have, StartTime: 0, EndTime: 5, NumberX: 123}
	if err := exec(ins); err != nil {
		t.Fatal(err)
	}
	cf := workload.TATPCallForwarding{EndTime: 5, NumberX: 123}
	if v := get(t, db, workload.TATPCallForwardingKey(sid, have, 0)); string(v) != string(cf.Append(nil)) {
		t.Fatalf("inserted call forwarding reads %x", v)
	}
	if err := exec(ins); !errors.Is(err, workload.ErrRejected) {
		t.Fatalf("second insert: %v, want a rejection", err)
	}
	ins.SFType = lack
	if err := exec(ins); !errors.Is(err, workload.ErrRejected) {
		t.Fatalf("insert for a missing facility: %v, want a rejection", err)
	}
	if get(t, db, workload.TATPCallForwardingKey(sid, lack, 0)) != nil {
		t.Fatal("a rejected insert wrote its row")
	}

	del := workload.TATPOp{Kind: workload.DeleteCallForwarding, SID: sid, SFType: have, StartTime: 0}
	if err := exec(del); err != nil {
		t.Fatal(err)
	}
	if get(t, db, workload.TATPCallForwardingKey(sid, have, 0)) != nil {
		t.Fatal("deleted call forwarding still there")
	}
	if err := exec(del); !errors.Is(err, workload.ErrRejected) {
		t.Fatalf("second delete: %v, want a rejection", err)
	}
	if _, err := tp.Exec(ctx, db, workload.TATPOp{Kind: workload.GetSubscriberData}); err == nil {
		t.Fatal("s_id 0 accepted")
	}
}
