-- Checkpoint metadata (the blobs live in the checkpoint store) and backtest
-- reports.
--
-- One checkpoint per (run, epoch): a retried Checkpoint activity rewrites the
-- same blob and the same row. is_best marks the unpruned checkpoint with the
-- highest validation Sharpe (ties: the earlier epoch); the partial unique
-- index makes two best checkpoints of one run impossible.

-- +goose Up
CREATE TABLE checkpoints (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    epoch        integer NOT NULL CHECK (epoch >= 1),
    uri          text NOT NULL CHECK (uri <> ''),
    sha256       text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    bytes        bigint NOT NULL CHECK (bytes >= 0),
    global_step  bigint NOT NULL CHECK (global_step >= 0),
    metrics      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metrics) = 'object'),
    valid_sharpe double precision,
    is_best      boolean NOT NULL DEFAULT false,
    pruned       boolean NOT NULL DEFAULT false,
    pruned_at    timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, epoch),
    CHECK (pruned = (pruned_at IS NOT NULL)),
    CHECK (NOT (is_best AND pruned))
);

CREATE UNIQUE INDEX checkpoints_one_best_idx ON checkpoints (run_id) WHERE is_best;

CREATE TABLE backtests (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id        text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    epoch         integer NOT NULL CHECK (epoch >= 1),
    -- "valid", "test", or any other name the caller gives a data range.
    split         text NOT NULL CHECK (split <> ''),
    checkpoint_id bigint REFERENCES checkpoints (id) ON DELETE SET NULL,
    data_from     timestamptz NOT NULL,
    data_to       timestamptz NOT NULL,
    report        jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(report) = 'object'),
    sharpe        double precision,
    total_return  double precision NOT NULL,
    max_drawdown  double precision NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, epoch, split),
    CHECK (data_from <= data_to)
);

CREATE INDEX backtests_checkpoint_id_idx ON backtests (checkpoint_id);

-- +goose Down
DROP TABLE backtests;
DROP TABLE checkpoints;
