// Package step owns one training step on the device: the Learner (online
// and target networks, AdamW moments, spectral vectors, the step state),
// its plan per batch size of buffers and launches (sampling, the forward
// and backward GEMMs, the C51 loss, the gradient norm, AdamW, the
// spectral step, the priority update) captured as CUDA graphs, the
// forward pass and inference that the collector and the backtest use, the
// prioritised replay buffer in device memory that the step samples, the
// module each model is compiled into (kernel options, GEMM paths), the
// precision self-checks, and StepLearner, the single-step view the
// cross-backend harness drives.
package step
