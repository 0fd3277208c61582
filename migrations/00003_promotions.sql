-- Retrain decisions. One row per Retrain workflow (retrain_run_id is its
-- workflow id): a retried activity finds the first decision. A lineage's
-- champion is the challenger of its latest promotion with promoted = true,
-- or, before any, the best checkpoint of the lineage's first run.

-- +goose Up
CREATE TABLE promotions (
    id                        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lineage                   text NOT NULL CHECK (lineage <> ''),
    retrain_run_id            text NOT NULL UNIQUE CHECK (retrain_run_id <> ''),
    challenger_run_id         text NOT NULL REFERENCES runs (run_id),
    challenger_checkpoint_uri text NOT NULL CHECK (challenger_checkpoint_uri <> ''),
    challenger_score          double precision,
    incumbent_run_id          text REFERENCES runs (run_id),
    incumbent_checkpoint_uri  text,
    incumbent_score           double precision,
    promoted                  boolean NOT NULL,
    reason                    text NOT NULL DEFAULT '',
    decided_at                timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX promotions_champion_idx ON promotions (lineage, decided_at DESC, id DESC) WHERE promoted;

-- +goose Down
DROP TABLE promotions;
