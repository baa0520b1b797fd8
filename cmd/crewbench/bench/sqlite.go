package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	_ "modernc.org/sqlite" // the pure-Go driver "sqlite"

	"github.com/crewlog/crewlog/events"
)

// sqliteStore is the common relational event store: one events table with a
// global autoincrement position and unique (stream, version), plus the run's
// state row (its version is the optimistic-concurrency token), in SQLite
// (modernc.org/sqlite, pure Go) with WAL and synchronous=FULL. Each admission
// is one transaction: read the state row, check, insert the events, update
// the row where the version is still the one read, commit (one WAL fsync).
//
// One connection: SQLite has one writer at a time, and database/sql queues
// callers on the connection instead of SQLite's sleeping busy handler.
type sqliteStore struct {
	db      *sql.DB
	commits atomic.Int64
}

const sqliteSchema = `
CREATE TABLE events(
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  stream   TEXT    NOT NULL,
  version  INTEGER NOT NULL,
  type     TEXT    NOT NULL,
  data     BLOB    NOT NULL,
  UNIQUE(stream, version)
);
CREATE TABLE streams(
  stream  TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  state   BLOB    NOT NULL
);`

func openSQLiteStore(dir string) (*sqliteStore, error) {
	dsn := "file:" + filepath.Join(dir, "events.db") +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: sqlite: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(sqliteSchema); err != nil {
		return nil, errors.Join(fmt.Errorf("bench: sqlite schema: %w", err), db.Close())
	}
	return &sqliteStore{db: db}, nil
}

func (s *sqliteStore) Setup(ctx context.Context, runs []string, spec Spec) error {
	for _, r := range runs {
		st := &runState{Granted: spec.Budget, Slots: spec.Slots}
		if err := s.tx(ctx, r, func(*runState) ([]event, error) {
			return []event{runCreated(spec.Budget)}, nil
		}, st); err != nil {
			return err
		}
	}
	return nil
}

// tx runs one read-check-append transaction on run, retrying on a version
// conflict. decide sees the state read in the transaction and returns the
// events to append; it may change the state. init is the state of a new run.
func (s *sqliteStore) tx(ctx context.Context, run string, decide func(*runState) ([]event, error),
	init *runState) error {
	for {
		err := s.try(ctx, run, decide, init)
		if !errors.Is(err, errConflict) {
			return err
		}
	}
}

func (s *sqliteStore) try(ctx context.Context, run string, decide func(*runState) ([]event, error),
	init *runState) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("bench: sqlite begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	st := init
	var blob []byte
	var version uint64
	switch err := tx.QueryRowContext(ctx, `SELECT version, state FROM streams WHERE stream = ?`,
		run).Scan(&version, &blob); {
	case errors.Is(err, sql.ErrNoRows) && init != nil:
	case err != nil:
		return fmt.Errorf("bench: sqlite read %s: %w", run, err)
	default:
		st = &runState{}
		if err := msgpack.Unmarshal(blob, st); err != nil {
			return fmt.Errorf("bench: sqlite state: %w", err)
		}
	}
	read := st.Version
	evs, err := decide(st)
	if err != nil {
		return err
	}
	for _, e := range evs {
		p, err := events.EncodePayload(e.Payload)
		if err != nil {
			return err
		}
		st.Version++
		if _, err := tx.ExecContext(ctx, `INSERT INTO events(stream, version, type, data) VALUES (?, ?, ?, ?)`,
			run, st.Version, e.Type, p); err != nil {
			if strings.Contains(err.Error(), "UNIQUE constraint") {
				return fmt.Errorf("bench: sqlite insert: %w (%w)", err, errConflict)
			}
			return fmt.Errorf("bench: sqlite insert: %w", err)
		}
	}
	if blob, err = msgpack.Marshal(st); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO streams(stream, version, state) VALUES (?, ?, ?)
		ON CONFLICT(stream) DO UPDATE SET version = excluded.version, state = excluded.state`+
		` WHERE streams.version = ?`,
		run, st.Version, blob, read)
	if err != nil {
		return fmt.Errorf("bench: sqlite state: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return errConflict
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("bench: sqlite commit: %w", err)
	}
	s.commits.Add(1)
	return nil
}

// Commits counts the committed transactions.
func (s *sqliteStore) Commits() int64 { return s.commits.Load() }

func (s *sqliteStore) Admit(ctx context.Context, run string, tokens int64) (Admission, error) {
	var a Admission
	err := s.tx(ctx, run, func(st *runState) ([]event, error) {
		a = Admission{}
		sub := newSubID()
		a.Reason = st.decide(tokens)
		evs := decisionEvents(st, sub, a.Reason, tokens, time.Now().UnixMilli())
		if a.Reason == "" {
			st.admit(sub, tokens)
			a.SubID = sub
		}
		return evs, nil
	}, nil)
	return a, err
}

func (s *sqliteStore) Settle(ctx context.Context, run, subID, outcome string) error {
	return s.tx(ctx, run, func(st *runState) ([]event, error) {
		if err := st.settle(subID); err != nil {
			return nil, err
		}
		return settleEvents(subID, outcome)
	}, nil)
}

func (s *sqliteStore) Final(ctx context.Context) (map[string]Final, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT stream, type, data FROM events ORDER BY position`)
	if err != nil {
		return nil, fmt.Errorf("bench: sqlite read: %w", err)
	}
	defer rows.Close()
	f := newFinals()
	for rows.Next() {
		var r decodedRecord
		if err := rows.Scan(&r.Stream, &r.Type, &r.Payload); err != nil {
			return nil, fmt.Errorf("bench: sqlite read: %w", err)
		}
		if err := f.addRecord(r); err != nil {
			return nil, err
		}
	}
	return f.result(), rows.Err()
}

func (s *sqliteStore) Close() error { return s.db.Close() }

// sqliteSink is SQLite as a competent user would put it behind the group
// committer: one transaction per group (one WAL fsync), a prepared insert,
// position as the INTEGER PRIMARY KEY (the rowid: no AUTOINCREMENT, which
// SQLite's documentation advises against for its extra table and work), and
// the fastest settings SQLite documents as durable:
//
//   - journal_mode=WAL with synchronous=FULL: in WAL mode FULL syncs the WAL
//     at every commit; NORMAL does not, and a commit may roll back after a
//     power loss, so NORMAL is not durable;
//   - locking_mode=EXCLUSIVE: one process owns the database, so WAL needs no
//     shared-memory index and no lock calls per transaction;
//   - a 64 MiB page cache (Pebble's and crewlog's cache size) and temp_store=MEMORY.
//
// The run's state lives in the committer's memory, as it does for the file
// and Pebble sinks and in crewlog's projections: the table is the log, and
// UNIQUE(stream, version) is its stream index.
//
// NB: the transaction is the connection's own BEGIN and COMMIT, prepared
// once like the insert, not a database/sql Tx: Tx.StmtContext prepares a
// statement that was prepared on a Conn again, in every transaction, so
// through a Tx each group paid a prepare of its insert.
type sqliteSink struct {
	db                              *sql.DB
	conn                            *sql.Conn
	begin, insert, commit, rollback *sql.Stmt
}

const sqliteSinkSchema = `
CREATE TABLE events(
  position INTEGER PRIMARY KEY,
  stream   TEXT    NOT NULL,
  version  INTEGER NOT NULL,
  type     TEXT    NOT NULL,
  time     INTEGER NOT NULL,
  data     BLOB    NOT NULL,
  UNIQUE(stream, version)
);`

func openSQLiteSink(dir string) (*sqliteSink, error) {
	dsn := "file:" + filepath.Join(dir, "events.db") +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=locking_mode(EXCLUSIVE)" +
		"&_pragma=cache_size(-65536)&_pragma=temp_store(MEMORY)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: sqlite: %w", err)
	}
	db.SetMaxOpenConns(1)
	s := &sqliteSink{db: db}
	ctx := context.Background()
	if s.conn, err = db.Conn(ctx); err == nil {
		_, err = s.conn.ExecContext(ctx, sqliteSinkSchema)
	}
	for _, st := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		{&s.begin, `BEGIN`},
		{&s.insert, `INSERT INTO events(position, stream, version, type, time, data) VALUES (?, ?, ?, ?, ?, ?)`},
		{&s.commit, `COMMIT`},
		{&s.rollback, `ROLLBACK`},
	} {
		if err == nil {
			*st.stmt, err = s.conn.PrepareContext(ctx, st.query)
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bench: sqlite: %w", err), s.Close())
	}
	return s, nil
}

func (s *sqliteSink) Write(recs []sinkRecord, _ []byte) (err error) {
	ctx := context.Background()
	if _, err := s.begin.ExecContext(ctx); err != nil {
		return fmt.Errorf("bench: sqlite begin: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = s.rollback.ExecContext(ctx)
		}
	}()
	for _, r := range recs {
		if _, err := s.insert.ExecContext(ctx, int64(r.Pos), r.Stream, int64(r.Version), r.Type, r.TimeNs,
			r.Payload()); err != nil {
			return fmt.Errorf("bench: sqlite insert: %w", err)
		}
	}
	if _, err := s.commit.ExecContext(ctx); err != nil {
		return fmt.Errorf("bench: sqlite commit: %w", err)
	}
	return nil
}

func (s *sqliteSink) ReadAll(fn func(decodedRecord) error) error {
	ctx := context.Background()
	rows, err := s.conn.QueryContext(ctx,
		`SELECT position, stream, version, type, data FROM events ORDER BY position`)
	if err != nil {
		return fmt.Errorf("bench: sqlite read: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r decodedRecord
		var pos, ver int64
		if err := rows.Scan(&pos, &r.Stream, &ver, &r.Type, &r.Payload); err != nil {
			return fmt.Errorf("bench: sqlite read: %w", err)
		}
		r.Pos, r.Version = uint64(pos), uint64(ver)
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (s *sqliteSink) Close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.begin, s.insert, s.commit, s.rollback} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.conn != nil {
		errs = append(errs, s.conn.Close())
	}
	return errors.Join(append(errs, s.db.Close())...)
}
