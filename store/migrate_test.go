package store

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/migrations"
	"github.com/dqnflow/dqnflow/store/storetest"
)

// tables lists the schema's tables, sorted.
func tables(t *testing.T, ctx context.Context, url string) []string {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

var wantTables = []string{"backtests", "checkpoints", "epochs", "goose_db_version", "promotions", "runs",
	"walkforward_results", "walkforward_studies", "walkforward_windows"}

func TestMigrationsApplyFromEmptyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newSchema(t)
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	p, err := newProvider(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	sources := p.ListSources()
	if len(sources) == 0 {
		t.Fatal("no embedded migrations")
	}
	for i, src := range sources {
		if src.Version != int64(i+1) {
			t.Fatalf("migration %d is %s with version %d: versions must be 1, 2, 3... without gaps", i, src.Path, src.Version)
		}
	}

	// Every migration up, one by one, from an empty schema.
	for _, src := range sources {
		if _, err := p.UpByOne(ctx); err != nil {
			t.Fatalf("up %s: %v", src.Path, err)
		}
	}
	if got := tables(t, ctx, u); !slices.Equal(got, wantTables) {
		t.Fatalf("tables after up = %v, want %v", got, wantTables)
	}
	// Every migration down, to an empty schema again (the version table stays).
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down to 0: %v", err)
	}
	if got := tables(t, ctx, u); !slices.Equal(got, []string{"goose_db_version"}) {
		t.Fatalf("tables after down = %v, want only goose_db_version", got)
	}
	if v, err := p.GetDBVersion(ctx); err != nil || v != 0 {
		t.Fatalf("version after down = %d, %v; want 0", v, err)
	}
	// And up again, the way the binary does it; then once more, a no-op.
	for range 2 {
		if err := Migrate(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if got := tables(t, ctx, u); !slices.Equal(got, wantTables) {
		t.Fatalf("tables after up again = %v, want %v", got, wantTables)
	}
	if v, err := p.GetDBVersion(ctx); err != nil || v != sources[len(sources)-1].Version {
		t.Fatalf("version = %d, %v; want %d", v, err, sources[len(sources)-1].Version)
	}

	// The schema works: a run goes in and comes out.
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	newRun(t, s, metadata.NewRun{RunID: "after-redo"})
	if _, err := s.GetRun(ctx, "after-redo"); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateConcurrently starts several Migrate calls at once: all succeed
// and each migration is applied once. The schema is either empty or already
// has goose's version table; the second case matters, because without one
// goose's own retry of the version table creation spaces the callers out.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	for _, withVersionTable := range []bool{false, true} {
		t.Run(fmt.Sprint("version_table=", withVersionTable), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			u := newSchema(t)
			if withVersionTable {
				cfg, err := pgx.ParseConfig(u)
				if err != nil {
					t.Fatal(err)
				}
				db := stdlib.OpenDB(*cfg)
				p, err := newProvider(ctx, db)
				if err == nil {
					_, err = p.GetDBVersion(ctx) // creates the version table
				}
				db.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			const n = 3
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() { errs[i] = Migrate(ctx, u) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("migration %d: %v", i, err)
				}
			}
			if got := tables(t, ctx, u); !slices.Equal(got, wantTables) {
				t.Fatalf("tables = %v, want %v", got, wantTables)
			}
			conn, err := pgx.Connect(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			rows, _ := conn.Query(ctx, `SELECT version_id FROM goose_db_version WHERE version_id > 0 ORDER BY id`)
			versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				t.Fatal(err)
			}
			if want := embeddedVersions(t); !slices.Equal(versions, want) {
				t.Fatalf("applied versions = %v, want %v, each once", versions, want)
			}
		})
	}
}

// embeddedVersions returns 1..n for the n embedded migrations.
func embeddedVersions(t *testing.T) []int64 {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations: %v, %v", files, err)
	}
	var out []int64
	for i := range files {
		out = append(out, int64(i+1))
	}
	return out
}

func TestStoreMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	s := newPostgres(t) // migrated once by Migrate(url)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if n, want := count(t, s, "goose_db_version", "version_id > 0"), len(embeddedVersions(t)); n != want {
		t.Fatalf("%d applied versions, want %d", n, want)
	}
}

func TestMigrateNeedsAnExistingSchema(t *testing.T) {
	t.Parallel()
	u := storetest.WithSearchPath(t, newSchema(t), "dqnflow_no_such_schema")
	err := Migrate(context.Background(), u)
	if err == nil {
		t.Fatal("Migrate into a search_path with no existing schema succeeded")
	}
}
