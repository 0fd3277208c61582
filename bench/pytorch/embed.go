// Package pytorch holds the PyTorch reference of the training step
// (dqn.py) and its benchmark (bench.py), embedded so that "dqnflow bench
// --device cpu" can run them beside the CPU backend from any directory.
// README.md beside the scripts explains them.
package pytorch

import "embed"

// Scripts holds dqn.py and bench.py.
//
//go:embed dqn.py bench.py
var Scripts embed.FS
