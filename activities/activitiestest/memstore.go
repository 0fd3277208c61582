package activitiestest

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/store"
)

// MemStore is an in-memory activities.Store with the store's idempotence
// rules (one row per key, upserts, the first promotion of a retrain
// stands). It keeps what the tests look at, not every column.
type MemStore struct {
	mu          sync.Mutex
	Runs        map[string]*store.Run
	Epochs      map[string]map[int]store.EpochMetrics
	Checkpoints map[string]map[int]*store.CheckpointRecord
	Backtests   map[string]map[int]store.BacktestRecord
	Promotions  map[string]store.Promotion // by retrain run id
	Statuses    []string                   // "run:status", in order
	nextID      int64
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{
		Runs: map[string]*store.Run{}, Epochs: map[string]map[int]store.EpochMetrics{},
		Checkpoints: map[string]map[int]*store.CheckpointRecord{}, Backtests: map[string]map[int]store.BacktestRecord{},
		Promotions: map[string]store.Promotion{},
	}
}

func (m *MemStore) run(id string) (*store.Run, error) {
	r, ok := m.Runs[id]
	if !ok {
		return nil, fmt.Errorf("run %q: %w", id, store.ErrNotFound)
	}
	return r, nil
}

// CreateRun creates the run or returns the existing one, keyed like the
// store: on the workflow id and the first execution, a later execution
// under a used workflow id getting "<workflow id>.<execution id>".
func (m *MemStore) CreateRun(ctx context.Context, r store.NewRun) (store.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := r.RunID
	if old, ok := m.Runs[id]; ok {
		if r.ExecutionID == "" || old.ExecutionID == r.ExecutionID {
			return *old, nil
		}
		id = r.RunID + "." + r.ExecutionID
		if old, ok := m.Runs[id]; ok {
			return *old, nil
		}
	}
	lineage := r.Lineage
	if lineage == "" {
		lineage = id
	}
	run := &store.Run{RunID: id, WorkflowID: r.RunID, ExecutionID: r.ExecutionID, Lineage: lineage,
		ParentRunID: r.ParentRunID, Config: r.Config, Status: store.StatusRunning}
	m.Runs[id] = run
	return *run, nil
}

// SetRunStatus records the status.
func (m *MemStore) SetRunStatus(ctx context.Context, runID string, status store.Status, errText string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.run(runID)
	if err != nil {
		return err
	}
	if !status.Valid() {
		return fmt.Errorf("status %q: %w", status, store.ErrInvalid)
	}
	r.Status, r.Error = status, errText
	m.Statuses = append(m.Statuses, runID+":"+string(status))
	return nil
}

// SetRunDevice records the device.
func (m *MemStore) SetRunDevice(ctx context.Context, runID, backend, device, precision string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.run(runID)
	if err != nil {
		return err
	}
	r.Backend, r.Device, r.Precision = backend, device, precision
	return nil
}

// RecordEpoch upserts the epoch's metrics.
func (m *MemStore) RecordEpoch(ctx context.Context, runID string, epoch int, e store.EpochMetrics) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.run(runID)
	if err != nil {
		return err
	}
	if m.Epochs[runID] == nil {
		m.Epochs[runID] = map[int]store.EpochMetrics{}
	}
	m.Epochs[runID][epoch] = e
	r.EpochsDone = max(r.EpochsDone, epoch)
	return nil
}

// RecordCheckpoint upserts the checkpoint of (run, epoch).
func (m *MemStore) RecordCheckpoint(ctx context.Context, c store.CheckpointRecord) (store.CheckpointRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.run(c.RunID); err != nil {
		return store.CheckpointRecord{}, err
	}
	if m.Checkpoints[c.RunID] == nil {
		m.Checkpoints[c.RunID] = map[int]*store.CheckpointRecord{}
	}
	old := m.Checkpoints[c.RunID][c.Epoch]
	if old == nil {
		m.nextID++
		c.ID = m.nextID
	} else {
		c.ID = old.ID
	}
	if bt, ok := m.Backtests[c.RunID][c.Epoch]; ok && c.ValidSharpe == nil {
		c.ValidSharpe = bt.Sharpe
	}
	c.Pruned = false
	m.Checkpoints[c.RunID][c.Epoch] = &c
	return c, nil
}

// RecordBacktest upserts the backtest and scores the epoch's checkpoint.
func (m *MemStore) RecordBacktest(ctx context.Context, b store.BacktestRecord) (store.BacktestRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.run(b.RunID); err != nil {
		return store.BacktestRecord{}, err
	}
	if m.Backtests[b.RunID] == nil {
		m.Backtests[b.RunID] = map[int]store.BacktestRecord{}
	}
	m.Backtests[b.RunID][b.Epoch] = b
	if c := m.Checkpoints[b.RunID][b.Epoch]; c != nil {
		c.ValidSharpe = b.Sharpe
	}
	return b, nil
}

// Retention returns the unpruned checkpoints outside the keepLast newest
// and the keepBest best scored.
func (m *MemStore) Retention(ctx context.Context, runID string, keepLast, keepBest int) ([]store.CheckpointRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var live []*store.CheckpointRecord
	for _, c := range m.Checkpoints[runID] {
		if !c.Pruned {
			live = append(live, c)
		}
	}
	keep := map[int64]bool{}
	sort.Slice(live, func(i, j int) bool { return live[i].Epoch > live[j].Epoch })
	for i, c := range live {
		if i < keepLast {
			keep[c.ID] = true
		}
	}
	var scored []*store.CheckpointRecord
	for _, c := range live {
		if c.ValidSharpe != nil {
			scored = append(scored, c)
		}
	}
	sort.SliceStable(scored, func(i, j int) bool {
		if *scored[i].ValidSharpe != *scored[j].ValidSharpe {
			return *scored[i].ValidSharpe > *scored[j].ValidSharpe
		}
		return scored[i].Epoch < scored[j].Epoch
	})
	for i, c := range scored {
		if i < keepBest {
			keep[c.ID] = true
		}
	}
	var out []store.CheckpointRecord
	for _, c := range live {
		if !keep[c.ID] {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Epoch < out[j].Epoch })
	return out, nil
}

// MarkPruned marks the checkpoints pruned.
func (m *MemStore) MarkPruned(ctx context.Context, ids []int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		found := false
		for _, byEpoch := range m.Checkpoints {
			for _, c := range byEpoch {
				if c.ID == id {
					c.Pruned, found = true, true
				}
			}
		}
		if !found {
			return fmt.Errorf("checkpoint %d: %w", id, store.ErrNotFound)
		}
	}
	return nil
}

// Champion returns the challenger of the lineage's latest promotion, or
// ErrNotFound.
func (m *MemStore) Champion(ctx context.Context, lineage string) (store.Champion, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.champion(lineage)
}

func (m *MemStore) champion(lineage string) (store.Champion, error) {
	var best *store.Promotion
	for _, p := range m.Promotions {
		if p.Lineage == lineage && p.Promoted && (best == nil || p.ID > best.ID) {
			best = &p
		}
	}
	if best == nil {
		return store.Champion{}, fmt.Errorf("champion of lineage %s: %w", lineage, store.ErrNotFound)
	}
	return store.Champion{Lineage: lineage, RunID: best.ChallengerRunID, CheckpointURI: best.ChallengerCheckpointURI, Score: best.ChallengerScore, PromotionID: best.ID}, nil
}

// RecordPromotion records the first decision of a retrain and returns it.
// Like the store, a promotion stands only if the champion is still the
// incumbent it names (compare and set).
func (m *MemStore) RecordPromotion(ctx context.Context, p store.Promotion) (store.Promotion, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.Promotions[p.RetrainRunID]; ok {
		return old, nil
	}
	champ, _ := m.champion(p.Lineage) // zero when none
	if p.Promoted && (champ.RunID != p.IncumbentRunID || champ.CheckpointURI != p.IncumbentCheckpointURI) {
		p.Promoted = false
		p.Reason = "not promoted: the lineage's champion changed while this retrain ran; " + p.Reason
	}
	m.nextID++
	p.ID = m.nextID
	m.Promotions[p.RetrainRunID] = p
	return p, nil
}

// Checkpoint returns a copy of the checkpoint row of (run, epoch).
func (m *MemStore) Checkpoint(runID string, epoch int) (store.CheckpointRecord, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.Checkpoints[runID][epoch]
	if !ok {
		return store.CheckpointRecord{}, false
	}
	return *c, true
}

var _ activities.Store = (*MemStore)(nil)
