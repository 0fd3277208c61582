package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/metadata"
)

// WalkForwardWindowStore records a study a window at a time, as the
// WalkForward workflow runs it: the header first (and again at the end,
// with the study's plan, timings and notes), then each window with its
// results when that window ends. *SQLite refuses (ErrWalkForwardSQLite).
type WalkForwardWindowStore interface {
	WalkForwardStore
	RecordWalkForwardHeader(ctx context.Context, s metadata.WalkForwardStudy) error
	RecordWalkForwardWindow(ctx context.Context, study string, w metadata.WalkForwardWindow, results []metadata.WalkForwardResult) error
}

var (
	_ WalkForwardWindowStore = (*Store)(nil)
	_ WalkForwardWindowStore = (*SQLite)(nil)
)

// WalkForwardWindowStride is the gap between the positions of two
// windows' results recorded by RecordWalkForwardWindow: window w's result
// i has position w·stride + i, so that GetWalkForward lists them in
// window order whatever order the windows were recorded in. A window
// holds at most stride results.
const WalkForwardWindowStride = 1 << 20

// maxWalkForwardWindows bounds the windows a study recorded a window at
// a time may have: positions are 32-bit integers.
const maxWalkForwardWindows = (1<<31 - 1) / WalkForwardWindowStride

// RecordWalkForwardHeader writes study s's header row and its windows
// (s.Results are not written): a new study's, or over the header of the
// study of that id, keeping its creation time. A window stored already
// with the same index and dates keeps its results; stored windows that
// are not among s.Windows are deleted with theirs: they are an earlier
// study's of the same id, or windows a stopped study did not run.
//
// Retry: writing the same header again changes nothing.
func (s *Store) RecordWalkForwardHeader(ctx context.Context, st metadata.WalkForwardStudy) error {
	head := st
	head.Results = nil
	if err := checkStudy(head); err != nil {
		return fmt.Errorf("record walk-forward %s header: %w", st.ID, err)
	}
	seeds, err := json.Marshal(nonNil(st.Seeds))
	if err != nil {
		return fmt.Errorf("record walk-forward %s header: seeds: %w", st.ID, err)
	}
	idx := make([]int32, len(st.Windows))
	var from, valid, test, to []time.Time
	for i, w := range st.Windows {
		idx[i] = int32(w.Index)
		from, valid, test, to = append(from, w.TrainFrom), append(valid, w.ValidFrom), append(test, w.TestFrom), append(to, w.TestTo)
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO walkforward_studies (id, config, series, layout, seeds, leave_out, gate, panel,
				trials_study, trials_prior, trials_total, device, seconds, plan, notes, stopped, timings)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
			ON CONFLICT (id) DO UPDATE SET config = EXCLUDED.config, series = EXCLUDED.series, layout = EXCLUDED.layout,
				seeds = EXCLUDED.seeds, leave_out = EXCLUDED.leave_out, gate = EXCLUDED.gate, panel = EXCLUDED.panel,
				trials_study = EXCLUDED.trials_study, trials_prior = EXCLUDED.trials_prior, trials_total = EXCLUDED.trials_total,
				device = EXCLUDED.device, seconds = EXCLUDED.seconds, plan = EXCLUDED.plan, notes = EXCLUDED.notes,
				stopped = EXCLUDED.stopped, timings = EXCLUDED.timings`,
			st.ID, []byte(st.Config), []byte(st.Series), []byte(st.Layout), seeds, nonNil(st.LeaveOut), st.Gate, st.Panel,
			st.TrialsStudy, st.TrialsPrior, st.TrialsTotal, st.Device, st.Seconds,
			[]byte(orEmptyArray(st.Plan)), nonNil(st.Notes), st.Stopped, []byte(orEmptyArray(st.Timings))); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			DELETE FROM walkforward_windows w WHERE w.study = $1 AND NOT EXISTS (
				SELECT 1 FROM unnest($2::integer[], $3::timestamptz[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[])
					AS k(window_index, train_from, valid_from, test_from, test_to)
				WHERE k.window_index = w.window_index AND k.train_from = w.train_from AND k.valid_from = w.valid_from
					AND k.test_from = w.test_from AND k.test_to = w.test_to)`,
			st.ID, idx, from, valid, test, to)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO walkforward_windows (study, window_index, train_from, valid_from, test_from, test_to)
			SELECT $1, * FROM unnest($2::integer[], $3::timestamptz[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[])
			ON CONFLICT (study, window_index) DO NOTHING`,
			st.ID, idx, from, valid, test, to)
		return err
	})
	if err != nil {
		return fmt.Errorf("record walk-forward %s header: %w", st.ID, classify(err))
	}
	return nil
}

// RecordWalkForwardWindow writes window w of study study, whose header
// must be stored (RecordWalkForwardHeader), with its results, in one
// transaction. The results must all be of window w.
//
// Retry: the window's stored rows, if any, are replaced, so a retried
// window leaves one copy.
func (s *Store) RecordWalkForwardWindow(ctx context.Context, study string, w metadata.WalkForwardWindow, results []metadata.WalkForwardResult) error {
	what := fmt.Sprintf("record walk-forward %s window %d", study, w.Index)
	if w.Index < 0 || w.Index >= maxWalkForwardWindows {
		return fmt.Errorf("%s: %w: window index outside [0, %d)", what, metadata.ErrInvalid, maxWalkForwardWindows)
	}
	if len(results) > WalkForwardWindowStride {
		return fmt.Errorf("%s: %w: %d results, more than a window holds (%d)", what, metadata.ErrInvalid, len(results), WalkForwardWindowStride)
	}
	// checkStudy's rules, on a study of this one window.
	if err := checkStudy(metadata.WalkForwardStudy{ID: study, Config: []byte("{}"), Series: []byte("[]"), Layout: []byte("{}"),
		Windows: []metadata.WalkForwardWindow{w}, Results: results}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM walkforward_windows WHERE study = $1 AND window_index = $2`, study, w.Index); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO walkforward_windows (study, window_index, train_from, valid_from, test_from, test_to)
			VALUES ($1, $2, $3, $4, $5, $6)`, study, w.Index, w.TrainFrom, w.ValidFrom, w.TestFrom, w.TestTo); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"walkforward_results"}, walkForwardResultColumns,
			pgx.CopyFromSlice(len(results), func(i int) ([]any, error) {
				r := results[i]
				return []any{study, w.Index*WalkForwardWindowStride + i, r.Window, r.Series, r.Strategy, int64(r.Seed), r.Detail, r.Note, r.InTraining,
					r.ValidSharpe, r.ValidT, r.Bars, r.Sharpe, r.SharpeLo, r.SharpeHi, r.SharpeT, r.BarSharpe,
					r.DaysPerYear, r.TotalReturn, r.MaxDrawdown, r.Turnover, r.Costs, nonNil(r.Days), nonNil(r.Returns)}, nil
			}))
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, classify(err))
	}
	return nil
}

// RecordWalkForwardHeader refuses: see ErrWalkForwardSQLite.
func (s *SQLite) RecordWalkForwardHeader(ctx context.Context, st metadata.WalkForwardStudy) error {
	return fmt.Errorf("record walk-forward %s header: %w", st.ID, ErrWalkForwardSQLite)
}

// RecordWalkForwardWindow refuses: see ErrWalkForwardSQLite.
func (s *SQLite) RecordWalkForwardWindow(ctx context.Context, study string, w metadata.WalkForwardWindow, results []metadata.WalkForwardResult) error {
	return fmt.Errorf("record walk-forward %s window %d: %w", study, w.Index, ErrWalkForwardSQLite)
}
