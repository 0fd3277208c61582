-- Runs keyed on their first execution too.
--
-- A workflow id can be used again (the Temporal UI allows it, and any id
-- can after the namespace's retention). A run used to be keyed by its
-- workflow id alone, so a second run under an old id found the first one's
-- row and wrote its checkpoints over the first one's files. Now a run
-- records its workflow id and the Temporal run id of its first execution
-- (kept across Continue-As-New); a second execution under a used workflow
-- id gets the run id "<workflow id>.<execution id>". Rows from before keep
-- workflow_id = run_id and no execution id.

-- +goose Up
ALTER TABLE runs ADD COLUMN workflow_id text CHECK (workflow_id <> '');
ALTER TABLE runs ADD COLUMN execution_id text CHECK (execution_id <> '');
UPDATE runs SET workflow_id = run_id;
ALTER TABLE runs ALTER COLUMN workflow_id SET NOT NULL;

CREATE UNIQUE INDEX runs_execution_idx ON runs (workflow_id, execution_id) WHERE execution_id IS NOT NULL;

-- +goose Down
DROP INDEX runs_execution_idx;
ALTER TABLE runs DROP COLUMN execution_id;
ALTER TABLE runs DROP COLUMN workflow_id;
