package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/dqnflow/dqnflow/metadata"
)

// TestClassifySortsServerErrorsBySQLSTATEClass makes the real server raise
// errors of each kind and checks classify's answer: the permanent classes
// wrap ErrInvalid (the activities make them non-retryable StoreRejected
// failures), a missing referenced row ErrNotFound, and the transient ones
// neither, so that they are retried.
func TestClassifySortsServerErrorsBySQLSTATEClass(t *testing.T) {
	s := newPostgres(t)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `CREATE TABLE uniq (k int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, code string
		run        func(tx pgx.Tx) error
		want       error // nil: retryable
	}{
		{"NUL in text", "22021", func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT $1::text`, "a\x00b")
			return err
		}, metadata.ErrInvalid},
		{"integer out of range", "22003", func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT 2147483647::int + 1`)
			return err
		}, metadata.ErrInvalid},
		{"unique violation", "23505", func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO uniq VALUES (1), (1)`)
			return err
		}, metadata.ErrInvalid},
		{"undefined table", "42P01", func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT * FROM no_such_table`)
			return err
		}, metadata.ErrInvalid},
		{"syntax error", "42601", func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELEC 1`)
			return err
		}, metadata.ErrInvalid},
		{"missing referenced run", "23503", func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO epochs (run_id, epoch, loss, grad_norm, env_steps, global_step, duration_ms)
				VALUES ('no-such-run', 1, 0, 0, 0, 0, 0)`)
			return err
		}, metadata.ErrNotFound},
		{"query canceled by statement_timeout", "57014", func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 20`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT pg_sleep(2)`)
			return err
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := pgx.BeginFunc(ctx, s.pool, c.run)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != c.code {
				t.Fatalf("the server answered %v; want SQLSTATE %s", err, c.code)
			}
			got := classify(err)
			for _, sentinel := range []error{metadata.ErrInvalid, metadata.ErrNotFound} {
				if errors.Is(got, sentinel) != (sentinel == c.want) {
					t.Errorf("classify(%s) = %v; errors.Is %v is %v, want %v", c.code, got, sentinel, errors.Is(got, sentinel), sentinel == c.want)
				}
			}
			if !errors.As(got, &pgErr) {
				t.Errorf("classify(%s) lost the server's error: %v", c.code, got)
			}
		})
	}
}

// TestSQLiteClassifySortsErrors is the same for the SQLite store, with the
// errors the file raises.
func TestSQLiteClassifySortsErrors(t *testing.T) {
	s := newSQLite(t)
	ctx := context.Background()
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE uniq (k INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, query string
		want        error
	}{
		{"unique violation", `INSERT INTO uniq VALUES (1, 'a'), (1, 'b')`, metadata.ErrInvalid},
		{"not null violation", `INSERT INTO uniq VALUES (2, NULL)`, metadata.ErrInvalid},
		{"no such table", `SELECT * FROM no_such_table`, metadata.ErrInvalid},
		{"datatype mismatch", `INSERT INTO uniq VALUES ('x', 'a')`, metadata.ErrInvalid},
		{"blob too big", `SELECT zeroblob(2000000000)`, metadata.ErrInvalid},
		{"missing referenced run", `INSERT INTO epochs (run_id, epoch, loss, grad_norm, env_steps, global_step, duration_ms, recorded_at)
			VALUES ('no-such-run', 1, 0, 0, 0, 0, 0, 0)`, metadata.ErrNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.db.ExecContext(ctx, c.query)
			if err == nil {
				t.Fatal("the statement succeeded")
			}
			got := sqliteClassify(err)
			if !errors.Is(got, c.want) {
				t.Errorf("sqliteClassify(%v) = %v, want it to wrap %v", err, got, c.want)
			}
		})
	}
	if err := sqliteClassify(context.DeadlineExceeded); errors.Is(err, metadata.ErrInvalid) || errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("a deadline was classified as permanent: %v", err)
	}

	// SQLITE_BUSY, retryable: the store's connection holds the write lock
	// (its transactions are immediate) and another one does not wait.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	other, err := sql.Open("sqlite", "file:"+filepath.ToSlash(s.path)+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.ExecContext(ctx, `INSERT INTO uniq VALUES (3, 'c')`)
	var e *sqlite.Error
	if !errors.As(err, &e) || e.Code()&0xff != sqlite3.SQLITE_BUSY {
		t.Fatalf("a write beside a held write lock: %v; want SQLITE_BUSY", err)
	}
	if got := sqliteClassify(err); errors.Is(got, metadata.ErrInvalid) || errors.Is(got, metadata.ErrNotFound) {
		t.Errorf("SQLITE_BUSY was classified as permanent: %v", got)
	}
}
