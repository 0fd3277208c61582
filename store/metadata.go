package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/metadata"
)

// Reader is the read side of a metadata store: what "run show", "run
// compare" and "report" need.
type Reader interface {
	GetRun(ctx context.Context, runID string) (metadata.Run, error)
	ListRuns(ctx context.Context, f RunFilter) ([]metadata.Run, error)
	ListEpochs(ctx context.Context, runID string) ([]metadata.Epoch, error)
	ListCheckpoints(ctx context.Context, runID string) ([]metadata.CheckpointRecord, error)
	ListBacktests(ctx context.Context, runID string) ([]metadata.BacktestRecord, error)
	Close()
}

// Metadata is a whole metadata store. *Store (PostgreSQL, every shared
// deployment) and *SQLite (one machine's "dqnflow dev") implement it, and
// both pass the one suite in storetest.
type Metadata interface {
	Reader
	CreateRun(ctx context.Context, r metadata.NewRun) (metadata.Run, error)
	SetRunStatus(ctx context.Context, runID string, status metadata.Status, errText string) error
	SetRunDevice(ctx context.Context, runID, backend, device, precision string) error
	RecordEpoch(ctx context.Context, runID string, epoch int, m metadata.EpochMetrics) error
	RecordCheckpoint(ctx context.Context, c metadata.CheckpointRecord) (metadata.CheckpointRecord, error)
	GetCheckpoint(ctx context.Context, runID string, epoch int) (metadata.CheckpointRecord, error)
	LatestCheckpoint(ctx context.Context, runID string) (metadata.CheckpointRecord, error)
	BestCheckpoint(ctx context.Context, runID string) (metadata.CheckpointRecord, error)
	Retention(ctx context.Context, runID string, keepLast, keepBest int) ([]metadata.CheckpointRecord, error)
	MarkPruned(ctx context.Context, ids []int64) error
	RecordBacktest(ctx context.Context, b metadata.BacktestRecord) (metadata.BacktestRecord, error)
	RecordPromotion(ctx context.Context, p metadata.Promotion) (metadata.Promotion, error)
	Champion(ctx context.Context, lineage string) (metadata.Champion, error)
}

var (
	_ Metadata = (*Store)(nil)
	_ Metadata = (*SQLite)(nil)
)

// SQLiteScheme prefixes a database URL that names an SQLite file:
// "sqlite:PATH" (relative to the working directory) or "sqlite:///ABS".
const SQLiteScheme = "sqlite:"

// DefaultSQLiteFile is where "dqnflow dev" keeps its metadata when no
// PostgreSQL is configured or running, beside the Temporal dev server's
// own SQLite file.
const DefaultSQLiteFile = ".dqnflow/metadata.db"

// Location is the metadata store a process uses and why.
type Location struct {
	URL string // a postgres:// URL, a key=value connection string, or sqlite:PATH
	// Why says how it was chosen, for the line that names the store.
	Why string
}

// SQLitePath returns the file of an sqlite: URL, or "" for PostgreSQL.
func (l Location) SQLitePath() string { return sqlitePath(l.URL) }

// String names the store without its credentials.
func (l Location) String() string {
	if p := l.SQLitePath(); p != "" {
		return "SQLite " + p
	}
	if cfg, err := pgx.ParseConfig(l.URL); err == nil {
		return fmt.Sprintf("PostgreSQL %s:%d database %s", cfg.Host, cfg.Port, cfg.Database)
	}
	return "PostgreSQL (unparsable URL)"
}

func sqlitePath(url string) string {
	if !strings.HasPrefix(url, SQLiteScheme) {
		return ""
	}
	p := strings.TrimPrefix(url, SQLiteScheme)
	if strings.HasPrefix(p, "//") {
		p = strings.TrimPrefix(p, "//") // sqlite:///abs/path
	}
	return filepath.FromSlash(p)
}

// Locate picks the metadata store the way Temporal's dev server picks its
// persistence: DATABASE_URL when it is set (PostgreSQL, or sqlite:PATH);
// else the local PostgreSQL server at DefaultURL when it answers within a
// second (its dqnflow database, which is created when create is set and it
// is missing); else the SQLite file sqliteFile. With create false, a missing
// SQLite file is an error that says what to start, so that a command run
// in the wrong directory does not report an empty store.
func Locate(ctx context.Context, sqliteFile string, create bool) (Location, error) {
	return locate(ctx, os.Getenv("DATABASE_URL"), DefaultURL, sqliteFile, create)
}

// locate is Locate with the environment's DATABASE_URL and the local
// server's URL as arguments.
func locate(ctx context.Context, databaseURL, localURL, sqliteFile string, create bool) (Location, error) {
	if databaseURL != "" {
		return Location{URL: databaseURL, Why: "DATABASE_URL"}, nil
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	local := Location{URL: localURL}
	conn, err := pgx.Connect(pctx, localURL)
	if err == nil {
		conn.Close(ctx)
		local.Why = "the local server; DATABASE_URL is unset"
		return local, nil
	}
	if isNoSuchDatabase(err) {
		// The server answers but has no database of ours yet.
		name := "dqnflow"
		if cfg, perr := pgx.ParseConfig(localURL); perr == nil {
			name = cfg.Database
		}
		if !create {
			// A reader where "dqnflow dev" kept its rows in SQLite.
			if _, err := os.Stat(sqliteFile); err == nil {
				return Location{URL: SQLiteScheme + filepath.ToSlash(sqliteFile),
					Why: fmt.Sprintf("DATABASE_URL is unset and the local server at %s has no %q database", hostPort(localURL), name)}, nil
			}
			return local, fmt.Errorf("no metadata store: DATABASE_URL is unset and the local PostgreSQL server at %s has no %q database yet "+
				"(\"dqnflow dev\" or a worker creates it); set DATABASE_URL, or start one of them first", hostPort(localURL), name)
		}
		if _, err := CreateDatabase(ctx, localURL); err != nil {
			return local, err
		}
		local.Why = fmt.Sprintf("the local server, database %q created; DATABASE_URL is unset", name)
		return local, nil
	}
	loc := Location{URL: SQLiteScheme + filepath.ToSlash(sqliteFile),
		Why: "DATABASE_URL is unset and no PostgreSQL server answers at " + hostPort(localURL)}
	if !create {
		if _, err := os.Stat(sqliteFile); errors.Is(err, os.ErrNotExist) {
			return loc, fmt.Errorf("no metadata store: DATABASE_URL is unset, no PostgreSQL server answers at %s, "+
				"and there is no %s here (\"dqnflow dev\" creates it in the directory it runs in); "+
				"set DATABASE_URL, or run this command where \"dqnflow dev\" runs", hostPort(localURL), sqliteFile)
		}
	}
	return loc, nil
}

// Connect opens the store at loc and brings its schema up to date: the
// PostgreSQL migrations, or the SQLite schema.
func Connect(ctx context.Context, loc Location) (Metadata, error) {
	if p := loc.SQLitePath(); p != "" {
		return OpenSQLite(ctx, p)
	}
	if err := Migrate(ctx, loc.URL); err != nil {
		return nil, err
	}
	return Open(ctx, loc.URL)
}

// OpenReader opens the store at loc for reading, without migrating it.
func OpenReader(ctx context.Context, loc Location) (Reader, error) {
	if p := loc.SQLitePath(); p != "" {
		return OpenSQLite(ctx, p)
	}
	return Open(ctx, loc.URL)
}

// hostPort is the server address of a PostgreSQL URL.
func hostPort(url string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "(unparsable URL)"
	}
	return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
}
