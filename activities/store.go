package activities

import (
	"context"

	"github.com/dqnflow/dqnflow/metadata"
)

// CheckpointStore is the part of the metadata store that the session
// activities write: checkpoint rows, backtest reports, and the epoch rows
// of the chunks RunEpochs trains. *store.Store and
// *store.SQLite implement it (store_test.go checks).
type CheckpointStore interface {
	RecordCheckpoint(ctx context.Context, c metadata.CheckpointRecord) (metadata.CheckpointRecord, error)
	RecordBacktest(ctx context.Context, b metadata.BacktestRecord) (metadata.BacktestRecord, error)
	RecordEpoch(ctx context.Context, runID string, epoch int, m metadata.EpochMetrics) error
}

// Store is the metadata store the control activities use. *store.Store
// and *store.SQLite implement it; every write is an upsert on a unique key, so a retried
// activity writes nothing twice.
type Store interface {
	CheckpointStore
	CreateRun(ctx context.Context, r metadata.NewRun) (metadata.Run, error)
	SetRunStatus(ctx context.Context, runID string, status metadata.Status, errText string) error
	SetRunDevice(ctx context.Context, runID, backend, device, precision string) error
	ListCheckpoints(ctx context.Context, runID string) ([]metadata.CheckpointRecord, error)
	ListBacktests(ctx context.Context, runID string) ([]metadata.BacktestRecord, error)
	Retention(ctx context.Context, runID string, keepLast, keepBest int) ([]metadata.CheckpointRecord, error)
	MarkPruned(ctx context.Context, ids []int64) error
	Champion(ctx context.Context, lineage string) (metadata.Champion, error)
	RecordPromotion(ctx context.Context, p metadata.Promotion) (metadata.Promotion, error)
}

// WalkForwardStore is the part of a metadata store that keeps walk-forward
// studies a window at a time (store.WalkForwardWindowStore, which
// *store.Store and *store.SQLite implement, the latter by refusing). The
// activities ask a Store for it, so that a store without studies is
// refused with what to do.
type WalkForwardStore interface {
	RecordWalkForward(ctx context.Context, s metadata.WalkForwardStudy) error
	GetWalkForward(ctx context.Context, id string) (metadata.WalkForwardStudy, error)
	RecordWalkForwardHeader(ctx context.Context, s metadata.WalkForwardStudy) error
	RecordWalkForwardWindow(ctx context.Context, study string, w metadata.WalkForwardWindow, results []metadata.WalkForwardResult) error
}
