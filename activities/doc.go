// Package activities holds the Temporal activities of dqnflow, as methods on
// structs whose fields are their dependencies:
//
//   - Trainer: the session activities of a training run (OpenTrainer,
//     RunEpochs, which trains a chunk of epochs in one call (ADR 0010),
//     the per-stage Collect, TrainEpoch, SyncTarget of the executions that
//     began before it, Checkpoint, Backtest, CloseTrainer, and HoldSlot
//     before a Continue-As-New) and EvaluateCheckpoints. They run on a GPU worker, inside a Temporal
//     session, so that every activity of a run reaches the worker that
//     holds the run's trainer in memory. They look the trainer up in the
//     worker's Registry, call it, heartbeat progress, and turn
//     deterministic failures into non-retryable errors.
//   - Control: light activities that only talk to the metadata Store (run
//     rows, epoch metrics, retention, what a failed chunk recorded,
//     champions and promotions). They run
//     on the control task queue.
//
// Every activity takes one input struct and returns one output struct, and
// every one is safe to retry: store writes are upserts on unique keys,
// checkpoint blobs are written atomically under a name fixed by run and
// epoch, and the stateful trainer steps are idempotent per (run, epoch, stage)
// (see Run).
//
// Failures that no retry can fix are non-retryable application errors whose
// Type is one of the ErrType constants; IsFatal tells a workflow which of
// them must end the run rather than start a recovery from the last
// checkpoint.
package activities
