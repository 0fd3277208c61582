package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/metadata"
)

const promotionColumns = `id, lineage, retrain_run_id, challenger_run_id, challenger_checkpoint_uri,
	challenger_score, COALESCE(incumbent_run_id, '') AS incumbent_run_id,
	COALESCE(incumbent_checkpoint_uri, '') AS incumbent_checkpoint_uri, incumbent_score,
	promoted, reason, decided_at`

// RecordPromotion records a retrain's decision and returns the stored one.
// ID and DecidedAt are read from the database, not from p. The challenger
// must be a run of p.Lineage.
//
// Compare and set: a decision to promote stands only if the lineage's
// champion is still the incumbent the retrain compared against
// (p.IncumbentRunID and p.IncumbentCheckpointURI, both empty when it found
// none; a challenger that is the lineage's first run, champion by default,
// counts as none). Otherwise another retrain promoted its challenger meanwhile, or
// the first run's best checkpoint moved, and this challenger was never
// compared against the champion it would replace: the decision is
// recorded as not promoted, with a reason that names the champion. Writers
// of one lineage are serialised by a transaction-level advisory lock.
//
// Retry: the first decision recorded for p.RetrainRunID stands; a later call
// changes nothing and returns it, so the caller must act on the returned
// Promoted, not on its own.
func (s *Store) RecordPromotion(ctx context.Context, p metadata.Promotion) (metadata.Promotion, error) {
	if err := validPromotion(p); err != nil {
		return metadata.Promotion{}, fmt.Errorf("record promotion of retrain %s: %w", p.RetrainRunID, err)
	}
	var out metadata.Promotion
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lineageLockID(p.Lineage)); err != nil {
			return err
		}
		var err error
		out, err = decidePromotion(p, promotionTx{
			noRows: pgx.ErrNoRows,
			recorded: func() (metadata.Promotion, error) {
				return promotionOf(ctx, tx, p.RetrainRunID)
			},
			lineageOf: func(runID string) (lineage string, err error) {
				err = tx.QueryRow(ctx, `SELECT lineage FROM runs WHERE run_id = $1`, runID).Scan(&lineage)
				return lineage, err
			},
			champion: func(lineage string) (metadata.Champion, error) { return champion(ctx, tx, lineage) },
			insert: func(p metadata.Promotion) error {
				_, err := tx.Exec(ctx, `
			INSERT INTO promotions (lineage, retrain_run_id, challenger_run_id, challenger_checkpoint_uri,
				challenger_score, incumbent_run_id, incumbent_checkpoint_uri, incumbent_score, promoted, reason)
			VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), NULLIF($7, ''), $8, $9, $10)`,
					p.Lineage, p.RetrainRunID, p.ChallengerRunID, p.ChallengerCheckpointURI, score(p.ChallengerScore),
					p.IncumbentRunID, p.IncumbentCheckpointURI, score(p.IncumbentScore), p.Promoted, p.Reason)
				return err
			},
		})
		return err
	})
	if err != nil {
		return metadata.Promotion{}, fmt.Errorf("record promotion of retrain %s: %w", p.RetrainRunID, classify(err))
	}
	return out, nil
}

// promotionTx is what recording a promotion reads and writes inside the
// transaction of one store; decidePromotion holds the decision that every
// store shares. noRows is the error the store's queries return when a row
// is missing.
type promotionTx struct {
	noRows    error
	recorded  func() (metadata.Promotion, error)
	lineageOf func(runID string) (string, error)
	champion  func(lineage string) (metadata.Champion, error)
	insert    func(metadata.Promotion) error
}

// decidePromotion records p through tx and returns the decision stored
// for p.RetrainRunID: the first one recorded, if any, stands; otherwise
// the challenger must belong to p.Lineage, and a decision to promote is
// held against the champion now (compareAndSet).
func decidePromotion(p metadata.Promotion, tx promotionTx) (metadata.Promotion, error) {
	first, err := tx.recorded()
	if err == nil {
		return first, nil
	}
	if !errors.Is(err, tx.noRows) {
		return metadata.Promotion{}, err
	}
	lineage, err := tx.lineageOf(p.ChallengerRunID)
	if errors.Is(err, tx.noRows) {
		return metadata.Promotion{}, fmt.Errorf("challenger run %s: %w", p.ChallengerRunID, metadata.ErrNotFound)
	}
	if err != nil {
		return metadata.Promotion{}, err
	}
	if lineage != p.Lineage {
		return metadata.Promotion{}, fmt.Errorf("%w: challenger run %s belongs to lineage %q, not %q", metadata.ErrInvalid, p.ChallengerRunID, lineage, p.Lineage)
	}
	if p.Promoted {
		champ, err := tx.champion(p.Lineage)
		if err != nil && !errors.Is(err, tx.noRows) {
			return metadata.Promotion{}, err
		}
		p = compareAndSet(p, champ)
	}
	if err := tx.insert(p); err != nil {
		return metadata.Promotion{}, err
	}
	return tx.recorded()
}

// validPromotion checks the fields of p that every store requires.
func validPromotion(p metadata.Promotion) error {
	if p.Lineage == "" || p.RetrainRunID == "" || p.ChallengerRunID == "" || p.ChallengerCheckpointURI == "" {
		return fmt.Errorf("%w: lineage, retrain run id, challenger run id and checkpoint uri are required", metadata.ErrInvalid)
	}
	return nil
}

// promotionOf returns the decision recorded for a retrain, or pgx.ErrNoRows.
func promotionOf(ctx context.Context, q pgx.Tx, retrainRunID string) (metadata.Promotion, error) {
	rows, _ := q.Query(ctx, `SELECT `+promotionColumns+` FROM promotions WHERE retrain_run_id = $1`, retrainRunID)
	return pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[metadata.Promotion])
}

// lineageLockID is the advisory lock key that serialises the promotions of
// one lineage: FNV-1a (64 bit) of "dqnflow promotions " + lineage.
func lineageLockID(lineage string) int64 {
	h := fnv.New64a()
	h.Write([]byte("dqnflow promotions " + lineage))
	return int64(h.Sum64())
}

// Champion returns the lineage's champion: the challenger of its latest
// promotion with promoted = true or, before any, the best checkpoint of the
// lineage's first run (the earliest one without a parent). A lineage with
// neither has no champion (ErrNotFound).
func (s *Store) Champion(ctx context.Context, lineage string) (metadata.Champion, error) {
	c, err := champion(ctx, s.pool, lineage)
	if errors.Is(err, pgx.ErrNoRows) {
		return metadata.Champion{}, fmt.Errorf("champion of lineage %s: %w", lineage, metadata.ErrNotFound)
	}
	if err != nil {
		return metadata.Champion{}, fmt.Errorf("champion of lineage %s: %w", lineage, classify(err))
	}
	return c, nil
}

// champion is Champion on q (the pool, or a transaction); pgx.ErrNoRows
// when the lineage has none.
func champion(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, lineage string) (metadata.Champion, error) {
	rows, _ := q.Query(ctx, `
		(SELECT p.lineage, p.challenger_run_id AS run_id, p.challenger_checkpoint_uri AS checkpoint_uri,
			COALESCE(c.sha256, '') AS checkpoint_sha256, COALESCE(c.epoch, 0) AS checkpoint_epoch,
			COALESCE(c.global_step, 0) AS checkpoint_step,
			p.challenger_score AS score, p.id AS promotion_id, p.decided_at AS since, 0 AS rank
		FROM promotions p LEFT JOIN checkpoints c
			ON c.run_id = p.challenger_run_id AND c.uri = p.challenger_checkpoint_uri
		WHERE p.lineage = $1 AND p.promoted
		ORDER BY p.decided_at DESC, p.id DESC LIMIT 1)
		UNION ALL
		(SELECT r.lineage, r.run_id, c.uri, c.sha256, c.epoch, c.global_step, c.valid_sharpe, 0, r.created_at, 1
		FROM runs r JOIN checkpoints c ON c.run_id = r.run_id AND c.is_best
		WHERE r.lineage = $1 AND r.parent_run_id IS NULL
		ORDER BY r.created_at, r.run_id LIMIT 1)
		ORDER BY rank LIMIT 1`, lineage)
	type row struct {
		metadata.Champion
		Rank int `db:"rank"`
	}
	c, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[row])
	return c.Champion, err
}

// compareAndSet returns p, a decision to promote, unchanged if champ (the
// lineage's champion now; zero when it has none) is still the incumbent
// that p compared against, and otherwise turned into a refusal whose
// reason names both. Every store applies it inside the transaction that
// records p.
func compareAndSet(p metadata.Promotion, champ metadata.Champion) metadata.Promotion {
	if champ.PromotionID == 0 && champ.RunID == p.ChallengerRunID {
		// The challenger is the lineage's first run, champion only
		// by default: the retrain found none when it began.
		champ = metadata.Champion{}
	}
	if champ.RunID == p.IncumbentRunID && champ.CheckpointURI == p.IncumbentCheckpointURI {
		return p
	}
	now := "none"
	if champ.RunID != "" {
		now = fmt.Sprintf("run %s, %s", champ.RunID, champ.CheckpointURI)
	}
	read := "none"
	if p.IncumbentRunID != "" {
		read = fmt.Sprintf("run %s, %s", p.IncumbentRunID, p.IncumbentCheckpointURI)
	}
	p.Promoted = false
	p.Reason = fmt.Sprintf("not promoted: the lineage's champion changed while this retrain ran "+
		"(it compared against %s; the champion is now %s); retrain again to compare against it. "+
		"Its comparison: %s", read, now, p.Reason)
	return p
}
