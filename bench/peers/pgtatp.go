package peers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/rdmakit/rdmakit/workload"
)

// PGTATP is TATP on PostgreSQL as the TATP specification writes it: the
// tables subscriber (with a unique index on sub_nbr), access_info,
// special_facility and call_forwarding with their composite keys and
// foreign keys, and the seven transactions in the specification's SQL at
// SERIALIZABLE isolation on a PGTxn, running the same operations
// (workload.TATPOp) the workload draws for rdmakit's protocols, on the
// same population.
type PGTATP struct {
	db *PGTxn
	w  *workload.TATP
}

// tatpSchema makes the tables without their secondary index and foreign
// keys (added after loading, as a bulk load does). The 32-bit locations
// are bigint: PostgreSQL's integer is signed.
var tatpSchema = []string{
	"DROP TABLE IF EXISTS call_forwarding, special_facility, access_info, subscriber",
	`CREATE TABLE subscriber (s_id integer PRIMARY KEY, sub_nbr varchar(15) NOT NULL,
		bit_1 smallint, bit_2 smallint, bit_3 smallint, bit_4 smallint, bit_5 smallint,
		bit_6 smallint, bit_7 smallint, bit_8 smallint, bit_9 smallint, bit_10 smallint,
		hex_1 smallint, hex_2 smallint, hex_3 smallint, hex_4 smallint, hex_5 smallint,
		hex_6 smallint, hex_7 smallint, hex_8 smallint, hex_9 smallint, hex_10 smallint,
		byte2_1 smallint, byte2_2 smallint, byte2_3 smallint, byte2_4 smallint, byte2_5 smallint,
		byte2_6 smallint, byte2_7 smallint, byte2_8 smallint, byte2_9 smallint, byte2_10 smallint,
		msc_location bigint, vlr_location bigint)`,
	`CREATE TABLE access_info (s_id integer NOT NULL, ai_type smallint NOT NULL,
		data1 smallint, data2 smallint, data3 char(3), data4 char(5), PRIMARY KEY (s_id, ai_type))`,
	`CREATE TABLE special_facility (s_id integer NOT NULL, sf_type smallint NOT NULL,
		is_active smallint NOT NULL, error_cntrl smallint, data_a smallint, data_b char(5),
		PRIMARY KEY (s_id, sf_type))`,
	`CREATE TABLE call_forwarding (s_id integer NOT NULL, sf_type smallint NOT NULL,
		start_time smallint NOT NULL, end_time smallint, numberx varchar(15),
		PRIMARY KEY (s_id, sf_type, start_time))`,
}

// tatpKeys are the index, foreign keys and statistics, after loading.
var tatpKeys = []string{
	"CREATE UNIQUE INDEX subscriber_sub_nbr ON subscriber (sub_nbr)",
	"ALTER TABLE access_info ADD FOREIGN KEY (s_id) REFERENCES subscriber",
	"ALTER TABLE special_facility ADD FOREIGN KEY (s_id) REFERENCES subscriber",
	"ALTER TABLE call_forwarding ADD FOREIGN KEY (s_id, sf_type) REFERENCES special_facility",
	"ANALYZE subscriber, access_info, special_facility, call_forwarding",
}

// tatpSubscriberCols are subscriber's columns in table order.
var tatpSubscriberCols = func() []string {
	cols := []string{"s_id", "sub_nbr"}
	for _, p := range []string{"bit_", "hex_", "byte2_"} {
		for i := 1; i <= 10; i++ {
			cols = append(cols, p+strconv.Itoa(i))
		}
	}
	return append(cols, "msc_location", "vlr_location")
}()

// TATP's statements (the specification's, with its parameters).
const (
	tatpGetSubscriber = "SELECT s_id, sub_nbr, bit_1, bit_2, bit_3, bit_4, bit_5, bit_6, bit_7, bit_8, bit_9, bit_10, " +
		"hex_1, hex_2, hex_3, hex_4, hex_5, hex_6, hex_7, hex_8, hex_9, hex_10, " +
		"byte2_1, byte2_2, byte2_3, byte2_4, byte2_5, byte2_6, byte2_7, byte2_8, byte2_9, byte2_10, " +
		"msc_location, vlr_location FROM subscriber WHERE s_id = $1"
	tatpGetNewDest = "SELECT cf.numberx FROM special_facility sf, call_forwarding cf " +
		"WHERE sf.s_id = $1 AND sf.sf_type = $2 AND sf.is_active = 1 AND cf.s_id = sf.s_id AND cf.sf_type = sf.sf_type " +
		"AND cf.start_time <= $3 AND $4 < cf.end_time"
	tatpGetAccess     = "SELECT data1, data2, data3, data4 FROM access_info WHERE s_id = $1 AND ai_type = $2"
	tatpSetBit1       = "UPDATE subscriber SET bit_1 = $2 WHERE s_id = $1"
	tatpSetDataA      = "UPDATE special_facility SET data_a = $3 WHERE s_id = $1 AND sf_type = $2"
	tatpSetLocation   = "UPDATE subscriber SET vlr_location = $2 WHERE sub_nbr = $1"
	tatpSIDOf         = "SELECT s_id FROM subscriber WHERE sub_nbr = $1"
	tatpSFTypes       = "SELECT sf_type FROM special_facility WHERE s_id = $1"
	tatpInsertForward = "INSERT INTO call_forwarding (s_id, sf_type, start_time, end_time, numberx) " +
		"VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"
	tatpDeleteForward = "DELETE FROM call_forwarding WHERE s_id = $1 AND sf_type = $2 AND start_time = $3"
)

// LoadPGTATP makes TATP's tables on db's server (dropping earlier ones)
// and loads w's population with COPY: the rows workload.TATP.Load writes
// with cfg, taken from the loader itself (the same Seed gives the same
// rows as on rdmakit's protocols).
func LoadPGTATP(ctx context.Context, db *PGTxn, w *workload.TATP, cfg workload.TxnLoad) (*PGTATP, error) {
	if err := execAll(ctx, db, tatpSchema); err != nil {
		return nil, fmt.Errorf("tatp: schema: %w", err)
	}
	rows := &tatpRows{}
	cfg.Trace = nil
	if err := w.Load(ctx, rows, cfg); err != nil {
		return nil, fmt.Errorf("tatp: population: %w", err)
	}
	for i, t := range tatpTables {
		got, err := db.pool.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(rows.tables[i]))
		if err != nil {
			return nil, fmt.Errorf("tatp: copy %s: %w", t.name, err)
		}
		if got != int64(len(rows.tables[i])) {
			return nil, fmt.Errorf("tatp: copy %s: %d rows of %d", t.name, got, len(rows.tables[i]))
		}
	}
	if err := execAll(ctx, db, tatpKeys); err != nil {
		return nil, fmt.Errorf("tatp: keys: %w", err)
	}
	return &PGTATP{db: db, w: w}, nil
}

// subscriberRow is a subscriber's row in tatpSubscriberCols order.
func subscriberRow(sid int32, s *workload.TATPSubscriber) []any {
	row := make([]any, 0, len(tatpSubscriberCols))
	row = append(row, sid, string(s.SubNbr[:]))
	for i := range 10 {
		row = append(row, int16(s.Bits>>i&1))
	}
	for _, h := range s.Hex {
		row = append(row, int16(h))
	}
	for _, b := range s.Byte2 {
		row = append(row, int16(b))
	}
	return append(row, int64(s.MSCLocation), int64(s.VLRLocation))
}

// numberX writes a forwarding number as the specification's 15 digits.
func numberX(n uint64) string { return fmt.Sprintf("%015d", n) }

// Exec runs op in a SERIALIZABLE transaction (the three reading ones and
// UPDATE_LOCATION are one statement each, sent alone), again while the
// server aborts it. The updates, inserts
// and deletes the specification lets fail (a missing special facility or
// call forwarding, an existing one) are rolled back and return an error
// wrapping workload.ErrRejected. The delta is always 0. Aborts are
// counted in s (nil: none). Exec is a workload.TxnExec.
func (t *PGTATP) Exec(ctx context.Context, s *workload.TxnSession, op workload.TATPOp) (int64, error) {
	if op.Kind > workload.DeleteCallForwarding || op.SID == 0 || op.SID > uint64(t.w.NumSubscribers()) {
		return 0, fmt.Errorf("tatp: operation %+v is not one the workload draws", op)
	}
	sid := int32(op.SID)
	sh := statements
	switch op.Kind {
	case workload.GetSubscriberData, workload.GetNewDestination, workload.GetAccessData, workload.UpdateLocation:
		sh = oneStatement
	}
	err := t.db.run(ctx, s, sh, func(tx querier) error {
		switch op.Kind {
		case workload.GetSubscriberData:
			return getSubscriberSQL(ctx, tx, sid)
		case workload.GetNewDestination:
			_, err := getNewDestinationSQL(ctx, tx, op)
			return err
		case workload.GetAccessData:
			var d1, d2 int16
			var d3, d4 string
			err := tx.QueryRow(ctx, tatpGetAccess, sid, int16(op.AIType)).Scan(&d1, &d2, &d3, &d4)
			return noRowsIsFine(err)
		case workload.UpdateSubscriberData:
			return updateSubscriberDataSQL(ctx, tx, op)
		case workload.UpdateLocation:
			tag, err := tx.Exec(ctx, tatpSetLocation, op.SubNbr(), int64(op.VLRLocation))
			return rejectNone(tag.RowsAffected(), err, "no subscriber "+op.SubNbr())
		case workload.InsertCallForwarding:
			return insertCallForwardingSQL(ctx, tx, op)
		default: // DeleteCallForwarding
			return deleteCallForwardingSQL(ctx, tx, op)
		}
	})
	if err != nil {
		return 0, fmt.Errorf("tatp: %v: %w", op.Kind, err)
	}
	return 0, nil
}

// getSubscriberSQL reads a subscriber's row (none is no failure).
func getSubscriberSQL(ctx context.Context, tx querier, sid int32) error {
	var id int32
	var nbr string
	var small [30]int16
	var msc, vlr int64
	dst := []any{&id, &nbr}
	for i := range small {
		dst = append(dst, &small[i])
	}
	dst = append(dst, &msc, &vlr)
	return noRowsIsFine(tx.QueryRow(ctx, tatpGetSubscriber, sid).Scan(dst...))
}

// getNewDestinationSQL returns the forwarding numbers of op's active
// special facility whose window covers op's.
func getNewDestinationSQL(ctx context.Context, tx querier, op workload.TATPOp) ([]string, error) {
	rows, err := tx.Query(ctx, tatpGetNewDest, int32(op.SID), int16(op.SFType), int16(op.StartTime), int16(op.EndTime))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// updateSubscriberDataSQL sets bit_1 and data_a in one round trip; no
// such special facility rejects (rolls back) both.
func updateSubscriberDataSQL(ctx context.Context, tx querier, op workload.TATPOp) error {
	b := &pgx.Batch{}
	b.Queue(tatpSetBit1, int32(op.SID), int16(op.Bit1))
	b.Queue(tatpSetDataA, int32(op.SID), int16(op.SFType), int16(op.DataA))
	res := tx.SendBatch(ctx, b)
	defer res.Close()
	tag, err := res.Exec()
	if err := rejectNone(tag.RowsAffected(), err, "no subscriber "+strconv.FormatUint(op.SID, 10)); err != nil {
		return err
	}
	tag, err = res.Exec()
	if err := rejectNone(tag.RowsAffected(), err, fmt.Sprintf("subscriber %d has no special facility %d", op.SID, op.SFType)); err != nil {
		return err
	}
	return res.Close()
}

// insertCallForwardingSQL finds the subscriber by sub_nbr and its special
// facilities, and inserts the row; a missing facility or an existing row
// rejects it.
func insertCallForwardingSQL(ctx context.Context, tx querier, op workload.TATPOp) error {
	sid, err := sidOf(ctx, tx, op.SubNbr())
	if err != nil {
		return err
	}
	rows, err := tx.Query(ctx, tatpSFTypes, sid)
	if err != nil {
		return err
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[int16])
	if err != nil {
		return err
	}
	if !slices.Contains(types, int16(op.SFType)) {
		return fmt.Errorf("%w: subscriber %d has no special facility %d", workload.ErrRejected, sid, op.SFType)
	}
	tag, err := tx.Exec(ctx, tatpInsertForward, sid, int16(op.SFType), int16(op.StartTime), int16(op.EndTime), numberX(op.NumberX))
	return rejectNone(tag.RowsAffected(), err, fmt.Sprintf("call forwarding %d/%d/%d exists", sid, op.SFType, op.StartTime))
}

// deleteCallForwardingSQL finds the subscriber by sub_nbr and deletes the
// row; none rejects it.
func deleteCallForwardingSQL(ctx context.Context, tx querier, op workload.TATPOp) error {
	sid, err := sidOf(ctx, tx, op.SubNbr())
	if err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, tatpDeleteForward, sid, int16(op.SFType), int16(op.StartTime))
	return rejectNone(tag.RowsAffected(), err, fmt.Sprintf("no call forwarding %d/%d/%d", sid, op.SFType, op.StartTime))
}

// sidOf looks a subscriber up by its number; none rejects the
// transaction.
func sidOf(ctx context.Context, tx querier, subNbr string) (int32, error) {
	var sid int32
	err := tx.QueryRow(ctx, tatpSIDOf, subNbr).Scan(&sid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: no subscriber %s", workload.ErrRejected, subNbr)
	}
	return sid, err
}

// noRowsIsFine drops pgx.ErrNoRows: a read that finds nothing commits.
func noRowsIsFine(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// rejectNone returns err, or a rejection saying why when a statement
// changed no row.
func rejectNone(rows int64, err error, why string) error {
	if err != nil {
		return err
	}
	if rows == 0 {
		return fmt.Errorf("%w: %s", workload.ErrRejected, why)
	}
	return nil
}
