// Package workflows holds dqnflow's Temporal workflows: TrainingRun (one
// model, in chunks of epochs, surviving worker loss), Retrain (a challenger
// against a lineage's champion, for Schedules), Sweep (child runs over a
// grid with bounded concurrency), and WalkForward (a calendar walk-forward
// study, a child WalkForwardWindow per window, recorded in the store).
//
// Workflow code here is pure orchestration: no I/O, clocks, randomness or
// goroutines outside the workflow package's own. The work is done by the
// activities package; the trainer's activities run inside a Temporal
// session on a GPU worker (docs/adr/0001-worker-affinity-with-sessions.md).
//
// The workflows are methods of Workflows, whose Options every worker must
// share. They are registered under TrainingRunName, RetrainName,
// SweepName, WalkForwardName and WalkForwardWindowName on
// ControlTaskQueue.
package workflows
