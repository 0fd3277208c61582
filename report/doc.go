// Package report writes what "dqnflow report" shows: one self-contained
// HTML page per run or sweep, with its plots drawn by gonum/plot as PNG
// files and inlined in the page.
//
// A run's report plots loss, gradient norm, ε and validation Sharpe per
// epoch from the metadata store, mean Q per checkpoint still on disk, the
// equity and drawdown of the best checkpoint against buy-and-hold on the
// validation range, and the mix of actions the best checkpoint chose over
// time. A sweep's report ranks its runs and shows each grid key's effect
// on the best validation Sharpe. The package draws and lays out; the
// caller (package cli) gathers the data.
package report
