package activities

import (
	"context"

	"github.com/dqnflow/dqnflow/store"
)

// CheckpointStore is the part of the metadata store that the session
// activities write: checkpoint rows, backtest reports, and the epoch rows
// of the chunks RunEpochs trains. *store.Store implements it.
type CheckpointStore interface {
	RecordCheckpoint(ctx context.Context, c store.CheckpointRecord) (store.CheckpointRecord, error)
	RecordBacktest(ctx context.Context, b store.BacktestRecord) (store.BacktestRecord, error)
	RecordEpoch(ctx context.Context, runID string, epoch int, m store.EpochMetrics) error
}

// Store is the metadata store the control activities use. *store.Store
// implements it; every write is an upsert on a unique key, so a retried
// activity writes nothing twice.
type Store interface {
	CheckpointStore
	CreateRun(ctx context.Context, r store.NewRun) (store.Run, error)
	SetRunStatus(ctx context.Context, runID string, status store.Status, errText string) error
	SetRunDevice(ctx context.Context, runID, backend, device, precision string) error
	ListCheckpoints(ctx context.Context, runID string) ([]store.CheckpointRecord, error)
	ListBacktests(ctx context.Context, runID string) ([]store.BacktestRecord, error)
	Retention(ctx context.Context, runID string, keepLast, keepBest int) ([]store.CheckpointRecord, error)
	MarkPruned(ctx context.Context, ids []int64) error
	Champion(ctx context.Context, lineage string) (store.Champion, error)
	RecordPromotion(ctx context.Context, p store.Promotion) (store.Promotion, error)
}

var _ Store = (*store.Store)(nil)
