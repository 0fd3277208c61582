package store

import "testing"

// suite is the one set of expectations every metadata store meets: the
// same keys, the same idempotent retries, the same retention and best
// flag, the same refusal of unknown runs and bad input. Each case runs in
// parallel with the others on a fresh, empty store of its own.
var suite = []struct {
	name string
	test func(t *testing.T, s Metadata)
}{
	{"CreateRunIsIdempotent", testCreateRunIsIdempotent},
	{"CreateRunRejectsBadInput", testCreateRunRejectsBadInput},
	{"SetRunStatus", testSetRunStatus},
	{"SetRunStatusStoresAnyErrorText", testSetRunStatusStoresAnyErrorText},
	{"SetRunDevice", testSetRunDevice},
	{"ListRunsFilters", testListRunsFilters},
	{"CreateRunKeysOnTheFirstExecution", testCreateRunKeysOnTheFirstExecution},
	{"RecordEpochIsIdempotent", testRecordEpochIsIdempotent},
	{"EpochsDoneNeverGoesDown", testEpochsDoneNeverGoesDown},
	{"RecordEpochRejectsBadInput", testRecordEpochRejectsBadInput},
	{"RecordCheckpointRetry", testRecordCheckpointRetry},
	{"LatestCheckpointSkipsPruned", testLatestCheckpointSkipsPruned},
	{"RetentionKeepsLastAndBest", testRetentionKeepsLastAndBest},
	{"MarkPrunedKeepsFirstPrunedAt", testMarkPrunedKeepsFirstPrunedAt},
	{"CheckpointJSONNamesEpochURIAndSHA256", testCheckpointJSONNamesEpochURIAndSHA256},
	{"BestFlagFollowsValidSharpe", testBestFlagFollowsValidSharpe},
	{"ValidBacktestFillsEpochScore", testValidBacktestFillsEpochScore},
	{"RecordBacktestRejectsBadInput", testRecordBacktestRejectsBadInput},
	{"RecordPromotionOnce", testRecordPromotionOnce},
	{"Champion", testChampion},
	{"PromotionComparesAgainstTheIncumbentItRead", testPromotionComparesAgainstTheIncumbentItRead},
	{"UnknownRunsAreRefused", testUnknownRunsAreRefused},
	{"ListsOfARunWithoutRowsAreEmpty", testListsOfARunWithoutRowsAreEmpty},
}

func runSuite(t *testing.T, newStore func(*testing.T) Metadata) {
	for _, c := range suite {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, newStore(t))
		})
	}
}

// TestPostgresStorePassesTheSuite runs the suite on PostgreSQL, the store
// of every shared deployment.
func TestPostgresStorePassesTheSuite(t *testing.T) {
	runSuite(t, func(t *testing.T) Metadata { return newPostgres(t) })
}

// TestSQLiteStorePassesTheSuite runs the suite on the embedded SQLite
// store of "dqnflow dev" without PostgreSQL.
func TestSQLiteStorePassesTheSuite(t *testing.T) {
	runSuite(t, func(t *testing.T) Metadata { return newSQLite(t) })
}
