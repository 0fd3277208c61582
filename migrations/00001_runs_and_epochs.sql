-- Runs and their per-epoch metrics.
--
-- A run is one TrainingRun workflow; run_id is its Temporal workflow id, so a
-- retried activity or a Continue-As-New finds the same row. Epochs are
-- numbered from 1; runs.epochs_done is the highest epoch recorded.

-- +goose Up
CREATE TABLE runs (
    run_id            text PRIMARY KEY CHECK (run_id <> ''),
    -- A retraining lineage: its first run's id unless the run says otherwise.
    lineage           text NOT NULL CHECK (lineage <> ''),
    parent_run_id     text REFERENCES runs (run_id) ON DELETE SET NULL,
    -- The RunConfig that ran, defaults filled in.
    config            jsonb NOT NULL CHECK (jsonb_typeof(config) = 'object'),
    status            text NOT NULL DEFAULT 'running' CHECK (status IN
                          ('running', 'paused', 'completed', 'stopped', 'early_stopped', 'failed', 'canceled')),
    -- What really ran (trainer.Info), empty until the trainer is built.
    backend           text NOT NULL DEFAULT '',
    device            text NOT NULL DEFAULT '',
    precision         text NOT NULL DEFAULT '',
    epochs_done       integer NOT NULL DEFAULT 0 CHECK (epochs_done >= 0),
    best_epoch        integer,
    best_valid_sharpe double precision,
    error             text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz
);

CREATE INDEX runs_created_at_idx ON runs (created_at DESC, run_id);
CREATE INDEX runs_lineage_idx ON runs (lineage, created_at);

CREATE TABLE epochs (
    run_id       text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    epoch        integer NOT NULL CHECK (epoch >= 1),
    loss         double precision NOT NULL,
    grad_norm    double precision NOT NULL,
    env_steps    bigint NOT NULL CHECK (env_steps >= 0),
    global_step  bigint NOT NULL CHECK (global_step >= 0),
    valid_sharpe double precision,
    duration_ms  bigint NOT NULL CHECK (duration_ms >= 0),
    -- Every other metric of the epoch (epsilon, mean reward, buffer size...).
    metrics      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metrics) = 'object'),
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, epoch)
);

-- +goose Down
DROP TABLE epochs;
DROP TABLE runs;
