// Package gpu is the CUDA backend of trainer.Backend: Backend, one device
// with the tuning its trainers run, and Trainer, trainer.Trainer on that
// device (the training loop and its read-backs, Collect, Backtest,
// Snapshot and Restore in the checkpoint format every backend shares),
// with the epoch and collector timings and the kernel profiles that the
// bench and the device visits read. It is the package the rest of
// dqnflow imports; the device work is in the packages below it (ADR
// 0044):
//
//   - gpu/step: one training step on the device: the learner, its plan
//     of launches and CUDA graphs, the GEMMs, inference, the device replay
//     buffer the step samples, and the precision self-checks;
//   - gpu/devenv: the device environment: the markets, the collector and
//     the greedy backtest, driven by the step's network;
//   - gpu/device: an opened CUDA device: its Tuning, the module cache,
//     memory arenas, kernel launches and their argument words;
//   - gpu/kernels: the CUDA C sources (embedded), the names of their
//     kernels and the GEMM tile shapes;
//   - gpu/cuda: the binding to the driver and NVRTC, opened at run time.
//
// Tuning is device.Tuning, the one value that holds every knob (ADR
// 0042); TuningFromEnv is the one reader of its overrides.
package gpu
