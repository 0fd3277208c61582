package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/metadata"
)

// WalkForwardStore keeps walk-forward studies: what `dqnflow walkforward`
// writes as results.json. It is not part of Metadata, because only
// *Store (PostgreSQL) keeps studies; *SQLite implements it by refusing
// (ErrWalkForwardSQLite), so that "dqnflow dev" without PostgreSQL says
// what to do instead of losing a study.
type WalkForwardStore interface {
	RecordWalkForward(ctx context.Context, s metadata.WalkForwardStudy) error
	GetWalkForward(ctx context.Context, id string) (metadata.WalkForwardStudy, error)
}

var (
	_ WalkForwardStore = (*Store)(nil)
	_ WalkForwardStore = (*SQLite)(nil)
)

// ErrWalkForwardSQLite is the SQLite store's answer to every walk-forward
// call. It wraps errors.ErrUnsupported.
var ErrWalkForwardSQLite = fmt.Errorf("walk-forward studies are not supported by the SQLite store: "+
	"set DATABASE_URL to a PostgreSQL server (or keep the study's results.json): %w", errors.ErrUnsupported)

// checkStudy rejects a study no retry could store: an empty id, a header that
// is not the JSON it should be, a result of a window the study lacks or
// with days and returns of different lengths. Errors name the position.
func checkStudy(s metadata.WalkForwardStudy) error {
	if s.ID == "" {
		return fmt.Errorf("%w: empty study id", metadata.ErrInvalid)
	}
	for _, f := range []struct {
		name     string
		raw      json.RawMessage
		kind     string // "object" or "array"
		optional bool   // empty means none
	}{{"config", s.Config, "object", false}, {"series", s.Series, "array", false}, {"layout", s.Layout, "object", false},
		{"plan", s.Plan, "array", true}, {"timings", s.Timings, "array", true}} {
		if len(f.raw) == 0 && f.optional {
			continue
		}
		open := byte('{')
		if f.kind == "array" {
			open = '['
		}
		if !json.Valid(f.raw) || firstByte(f.raw) != open {
			return fmt.Errorf("%w: %s is not a JSON %s", metadata.ErrInvalid, f.name, f.kind)
		}
	}
	windows := map[int]bool{}
	for i, w := range s.Windows {
		if windows[w.Index] {
			return fmt.Errorf("%w: window %d (position %d) is listed twice", metadata.ErrInvalid, w.Index, i)
		}
		windows[w.Index] = true
	}
	for i, r := range s.Results {
		switch {
		case !windows[r.Window]:
			return fmt.Errorf("%w: result %d (%s on %s) is of window %d, which the study does not list", metadata.ErrInvalid, i, r.Strategy, r.Series, r.Window)
		case len(r.Days) != len(r.Returns):
			return fmt.Errorf("%w: result %d (%s on %s, window %d): %d days but %d returns", metadata.ErrInvalid, i, r.Strategy, r.Series, r.Window, len(r.Days), len(r.Returns))
		}
	}
	return nil
}

// firstByte is raw's first byte after white space, or 0.
func firstByte(raw []byte) byte {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return b
	}
	return 0
}

// orEmptyArray is raw, or [] when raw is empty.
func orEmptyArray(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("[]")
	}
	return raw
}

// RecordWalkForward writes a whole study in one transaction: its header,
// windows and results (the results by COPY, a study holding millions of
// daily returns).
//
// Retry: a study of an id already stored replaces it, rows and creation
// time, so a retry or a second record of the same results.json leaves one
// copy.
func (s *Store) RecordWalkForward(ctx context.Context, st metadata.WalkForwardStudy) error {
	if err := checkStudy(st); err != nil {
		return fmt.Errorf("record walk-forward %s: %w", st.ID, err)
	}
	seeds, err := json.Marshal(nonNil(st.Seeds))
	if err != nil {
		return fmt.Errorf("record walk-forward %s: seeds: %w", st.ID, err)
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM walkforward_studies WHERE id = $1`, st.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO walkforward_studies (id, config, series, layout, seeds, leave_out, gate, panel,
				trials_study, trials_prior, trials_total, device, seconds, plan, notes, stopped, timings)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
			st.ID, []byte(st.Config), []byte(st.Series), []byte(st.Layout), seeds, nonNil(st.LeaveOut), st.Gate, st.Panel,
			st.TrialsStudy, st.TrialsPrior, st.TrialsTotal, st.Device, st.Seconds,
			[]byte(orEmptyArray(st.Plan)), nonNil(st.Notes), st.Stopped, []byte(orEmptyArray(st.Timings))); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"walkforward_windows"},
			[]string{"study", "window_index", "train_from", "valid_from", "test_from", "test_to"},
			pgx.CopyFromSlice(len(st.Windows), func(i int) ([]any, error) {
				w := st.Windows[i]
				return []any{st.ID, w.Index, w.TrainFrom, w.ValidFrom, w.TestFrom, w.TestTo}, nil
			})); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"walkforward_results"}, walkForwardResultColumns,
			pgx.CopyFromSlice(len(st.Results), func(i int) ([]any, error) {
				r := st.Results[i]
				return []any{st.ID, i, r.Window, r.Series, r.Strategy, int64(r.Seed), r.Detail, r.Note, r.InTraining,
					r.ValidSharpe, r.ValidT, r.Bars, r.Sharpe, r.SharpeLo, r.SharpeHi, r.SharpeT, r.BarSharpe,
					r.DaysPerYear, r.TotalReturn, r.MaxDrawdown, r.Turnover, r.Costs, nonNil(r.Days), nonNil(r.Returns)}, nil
			}))
		return err
	})
	if err != nil {
		return fmt.Errorf("record walk-forward %s: %w", st.ID, classify(err))
	}
	return nil
}

// walkForwardResultColumns are walkforward_results' columns: the study
// and the result's position, then WalkForwardResult's fields in order.
var walkForwardResultColumns = []string{"study", "position", "window_index", "series", "strategy", "seed", "detail", "note", "in_training",
	"valid_sharpe", "valid_t", "bars", "sharpe", "sharpe_lo", "sharpe_hi", "sharpe_t", "bar_sharpe",
	"days_per_year", "total_return", "max_drawdown", "turnover", "costs", "days", "returns"}

// GetWalkForward reads the study of id back: windows by index, results in
// the order they were recorded. An unknown id wraps ErrNotFound.
func (s *Store) GetWalkForward(ctx context.Context, id string) (metadata.WalkForwardStudy, error) {
	st := metadata.WalkForwardStudy{ID: id}
	var config, series, layout, seeds, plan, timings []byte
	err := s.pool.QueryRow(ctx, `
		SELECT created_at, config, series, layout, seeds, leave_out, gate, panel,
			trials_study, trials_prior, trials_total, device, seconds, plan, notes, stopped, timings
		FROM walkforward_studies WHERE id = $1`, id).Scan(
		&st.CreatedAt, &config, &series, &layout, &seeds, &st.LeaveOut, &st.Gate, &st.Panel,
		&st.TrialsStudy, &st.TrialsPrior, &st.TrialsTotal, &st.Device, &st.Seconds, &plan, &st.Notes, &st.Stopped, &timings)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("walk-forward study %q: %w", id, metadata.ErrNotFound)
	}
	if err != nil {
		return st, fmt.Errorf("get walk-forward %s: %w", id, classify(err))
	}
	st.Config, st.Series, st.Layout, st.Plan, st.Timings = config, series, layout, plan, timings
	if err := json.Unmarshal(seeds, &st.Seeds); err != nil {
		return st, fmt.Errorf("get walk-forward %s: seeds: %w", id, err)
	}
	rows, _ := s.pool.Query(ctx, `
		SELECT window_index, train_from, valid_from, test_from, test_to
		FROM walkforward_windows WHERE study = $1 ORDER BY window_index`, id)
	st.Windows, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (metadata.WalkForwardWindow, error) {
		var w metadata.WalkForwardWindow
		err := row.Scan(&w.Index, &w.TrainFrom, &w.ValidFrom, &w.TestFrom, &w.TestTo)
		w.TrainFrom, w.ValidFrom, w.TestFrom, w.TestTo = w.TrainFrom.UTC(), w.ValidFrom.UTC(), w.TestFrom.UTC(), w.TestTo.UTC()
		return w, err
	})
	if err != nil {
		return st, fmt.Errorf("get walk-forward %s: windows: %w", id, classify(err))
	}
	rows, _ = s.pool.Query(ctx, `
		SELECT window_index, series, strategy, seed, detail, note, in_training,
			valid_sharpe, valid_t, bars, sharpe, sharpe_lo, sharpe_hi, sharpe_t, bar_sharpe,
			days_per_year, total_return, max_drawdown, turnover, costs, days, returns
		FROM walkforward_results WHERE study = $1 ORDER BY position`, id)
	st.Results, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (metadata.WalkForwardResult, error) {
		var r metadata.WalkForwardResult
		var seed int64
		err := row.Scan(&r.Window, &r.Series, &r.Strategy, &seed, &r.Detail, &r.Note, &r.InTraining,
			&r.ValidSharpe, &r.ValidT, &r.Bars, &r.Sharpe, &r.SharpeLo, &r.SharpeHi, &r.SharpeT, &r.BarSharpe,
			&r.DaysPerYear, &r.TotalReturn, &r.MaxDrawdown, &r.Turnover, &r.Costs, &r.Days, &r.Returns)
		r.Seed = uint64(seed)
		return r, err
	})
	if err != nil {
		return st, fmt.Errorf("get walk-forward %s: results: %w", id, classify(err))
	}
	return st, nil
}

// RecordWalkForward refuses: see ErrWalkForwardSQLite.
func (s *SQLite) RecordWalkForward(ctx context.Context, st metadata.WalkForwardStudy) error {
	return fmt.Errorf("record walk-forward %s: %w", st.ID, ErrWalkForwardSQLite)
}

// GetWalkForward refuses: see ErrWalkForwardSQLite.
func (s *SQLite) GetWalkForward(ctx context.Context, id string) (metadata.WalkForwardStudy, error) {
	return metadata.WalkForwardStudy{}, fmt.Errorf("get walk-forward %s: %w", id, ErrWalkForwardSQLite)
}

// nonNil is s, or an empty slice for nil: the columns are NOT NULL arrays.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
