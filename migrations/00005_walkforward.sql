-- Walk-forward studies: what `dqnflow walkforward` writes as results.json,
-- kept in the store so that `dqnflow report --walkforward ID` can draw a
-- study recorded on another host.
--
-- A study is one row of walkforward_studies (its config, series, layout,
-- seeds and the rest of the study's header, as JSON where the Go type is
-- a document), a row per window and a row per result: one strategy (the
-- agent at a seed, or a baseline) on one series over one window's test
-- block, with its daily returns as arrays. Writing a study of an id that
-- exists replaces it (store.RecordWalkForward).
--
-- Results read back in the order they were written (position), which
-- orders the summary's series.
--
-- A result's seed is a uint64 in Go; it is kept as the bigint of the same
-- 64 bits (seeds at or above 2^63 read as negative numbers in SQL).

-- +goose Up
CREATE TABLE walkforward_studies (
    id           text PRIMARY KEY CHECK (id <> ''),
    created_at   timestamptz NOT NULL DEFAULT now(),
    config       jsonb NOT NULL CHECK (jsonb_typeof(config) = 'object'),
    series       jsonb NOT NULL CHECK (jsonb_typeof(series) = 'array'),
    layout       jsonb NOT NULL CHECK (jsonb_typeof(layout) = 'object'),
    seeds        jsonb NOT NULL CHECK (jsonb_typeof(seeds) = 'array'),
    leave_out    text[] NOT NULL DEFAULT '{}',
    gate         text NOT NULL DEFAULT '',
    panel        boolean NOT NULL DEFAULT false,
    trials_study integer NOT NULL CHECK (trials_study >= 0),
    trials_prior integer NOT NULL CHECK (trials_prior >= 0),
    trials_total integer NOT NULL CHECK (trials_total >= 0),
    device       text NOT NULL DEFAULT '',
    seconds      double precision NOT NULL DEFAULT 0,
    plan         jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(plan) = 'array'),
    notes        text[] NOT NULL DEFAULT '{}',
    stopped      text NOT NULL DEFAULT '', -- why the study ended early, or ''
    timings      jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(timings) = 'array')
);

CREATE TABLE walkforward_windows (
    study        text NOT NULL REFERENCES walkforward_studies (id) ON DELETE CASCADE,
    window_index integer NOT NULL CHECK (window_index >= 0),
    train_from   timestamptz NOT NULL,
    valid_from   timestamptz NOT NULL,
    test_from    timestamptz NOT NULL,
    test_to      timestamptz NOT NULL,
    PRIMARY KEY (study, window_index),
    CHECK (train_from <= valid_from AND valid_from <= test_from AND test_from <= test_to)
);

CREATE TABLE walkforward_results (
    study         text NOT NULL,
    window_index  integer NOT NULL,
    position      integer NOT NULL CHECK (position >= 0), -- the result's place in the study's list
    series        text NOT NULL CHECK (series <> ''),
    strategy      text NOT NULL CHECK (strategy <> ''),
    seed          bigint NOT NULL DEFAULT 0,
    detail        text NOT NULL DEFAULT '',
    note          text NOT NULL DEFAULT '',
    in_training   boolean NOT NULL,
    valid_sharpe  double precision NOT NULL DEFAULT 0,
    valid_t       double precision NOT NULL DEFAULT 0,
    bars          integer NOT NULL CHECK (bars >= 0),
    sharpe        double precision NOT NULL,
    sharpe_lo     double precision NOT NULL,
    sharpe_hi     double precision NOT NULL,
    sharpe_t      double precision NOT NULL,
    bar_sharpe    double precision NOT NULL DEFAULT 0,
    days_per_year double precision NOT NULL,
    total_return  double precision NOT NULL,
    max_drawdown  double precision NOT NULL,
    turnover      double precision NOT NULL,
    costs         double precision NOT NULL,
    days          integer[] NOT NULL,
    returns       double precision[] NOT NULL CHECK (cardinality(returns) = cardinality(days)),
    PRIMARY KEY (study, window_index, series, strategy, seed),
    FOREIGN KEY (study, window_index) REFERENCES walkforward_windows (study, window_index) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE walkforward_results;
DROP TABLE walkforward_windows;
DROP TABLE walkforward_studies;
