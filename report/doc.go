// Package report writes what dqnflow shows a reader of its results:
//
//   - "dqnflow report": one self-contained HTML page per run or sweep, with
//     its plots drawn by gonum/plot as PNG files and inlined in the page. A
//     run's report plots loss, gradient norm, ε and validation Sharpe per
//     epoch from the metadata store, mean Q per checkpoint still on disk,
//     the equity and drawdown of the best checkpoint against buy-and-hold on
//     the validation range, and the mix of actions the best checkpoint chose
//     over time. A sweep's report ranks its runs and shows each grid key's
//     effect on the best validation Sharpe (run.go, sweep.go, page.go,
//     plots.go). A walk-forward study's report ("dqnflow report
//     --walkforward") shows its summary: the portfolios' Sharpe ratios with
//     intervals and DSR, the agent against each baseline, the per-series and
//     per-year tables, the portfolios' equity and Sharpe interval plots
//     (walkforward.go).
//   - "dqnflow evaluate" and "dqnflow train": a Markdown page with the
//     metrics of each series' test range beside buy-and-hold and flat, and
//     PNG plots of equity and drawdown (markdown.go, plot.go).
//   - every command that backtests: a backtest report as text beside
//     buy-and-hold and flat (text.go).
//
// The package draws and lays out; the caller gathers the data.
package report
