package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
)

// DevServerFlags returns the arguments dqnflow adds to `temporal server
// start-dev`: the workflows' search attributes and two dynamic-config
// values that take the dev server's per-task latency from about 50 ms to
// about 4 ms (measured 2026-11-30, docs/perf/temporal-2026-11-30.md):
//
//   - history.transferProcessorMaxPollRPS=1000: the default of 20 polls per
//     second and shard makes every activity and workflow task wait up to
//     50 ms before history hands it to matching, and the dev server has
//     one shard;
//   - matching.numTaskqueue{Read,Write}Partitions=1: with the default four
//     partitions a task written to a partition without a waiting poller
//     goes through the database backlog and is forwarded after about 2 s;
//     one process needs no load spreading;
//   - SQLite in WAL mode with synchronous=NORMAL: a commit no longer waits
//     for an fsync of the database file, only the WAL is synced at
//     checkpoints. The history survives a crash of the dev server process
//     (the WAL is in the OS page cache); a power loss may lose the last
//     commits, which a development server can afford.
func DevServerFlags() []string {
	return append(SearchAttributeFlags(),
		"--sqlite-pragma", "journal_mode=wal",
		"--sqlite-pragma", "synchronous=normal",
		"--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000",
		"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
		"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
	)
}

// DialWhenReady dials opts.HostPort until the server passes a health check
// and returns that client. It gives up when ctx ends, after limit, or as
// soon as alive (the server process's liveness, may be nil) returns an
// error. `dqnflow dev` and the tests' dev servers wait with it.
func DialWhenReady(ctx context.Context, opts client.Options, limit time.Duration, alive func() error) (client.Client, error) {
	deadline := time.Now().Add(limit)
	var last error
	for {
		if alive != nil {
			if err := alive(); err != nil {
				return nil, fmt.Errorf("Temporal server at %s: %w", opts.HostPort, err)
			}
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := client.DialContext(dctx, opts)
		if err == nil {
			if _, err = c.CheckHealth(dctx, &client.CheckHealthRequest{}); err == nil {
				cancel()
				return c, nil
			}
			c.Close()
		}
		cancel()
		last = err
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(fmt.Errorf("Temporal server at %s did not answer within %s", opts.HostPort, limit), last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
