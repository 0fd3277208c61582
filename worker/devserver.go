package worker

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
