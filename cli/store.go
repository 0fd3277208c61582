package cli

import (
	"context"
	"fmt"

	"github.com/dqnflow/dqnflow/store"
)

// openStore opens the metadata store that locateStore picks and brings
// its schema up to date.
func openStore(ctx context.Context, e *env, create bool) (store.Metadata, error) {
	loc, err := locateStore(ctx, e, create)
	if err != nil {
		return nil, err
	}
	return store.Connect(ctx, loc)
}

// locateStore picks the metadata store as store.Locate does (DATABASE_URL,
// else the local PostgreSQL server, else .dqnflow/metadata.db) and says on
// stderr which store it is and why, before connecting to it. With create,
// a missing SQLite file will be created ("dqnflow dev", a worker);
// without, it is an error that says where to run the command.
func locateStore(ctx context.Context, e *env, create bool) (store.Location, error) {
	loc, err := store.Locate(ctx, store.DefaultSQLiteFile, create)
	if err != nil {
		return loc, err
	}
	fmt.Fprintf(e.stderr, "metadata store: %s (%s)\n", loc, loc.Why)
	return loc, nil
}

// openReader opens the metadata store for reading ("run list", "run
// show", "report"...). It names the store on stderr with --verbose only:
// dev and the workers say which store they write, "dqnflow doctor" which
// one the commands read.
func openReader(ctx context.Context, e *env) (store.Reader, error) {
	loc, err := store.Locate(ctx, store.DefaultSQLiteFile, false)
	if err != nil {
		return nil, err
	}
	st, err := store.OpenReader(ctx, loc)
	if err != nil {
		return nil, err
	}
	if e.verbose {
		fmt.Fprintf(e.stderr, "metadata store: %s (%s)\n", loc, loc.Why)
	}
	return st, nil
}
