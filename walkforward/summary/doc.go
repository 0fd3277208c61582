// Package summary owns what a reader judges a walk-forward study by,
// computed from its rows (walkforward.Result) alone: per group of series
// (trained on, left out), the agent's and each baseline's Sharpe ratios
// with block-bootstrap intervals per series, per year and for the
// portfolio across series, t-statistics, the deflated Sharpe ratio over
// the configurations tried, paired differences against each baseline and
// the share of windows and series the agent wins (Summarize), and their
// rendering as Markdown (Summary.Markdown) and as the portfolios' equity
// curves (Group.Portfolios). The statistics and their formulas are in
// package stats.
package summary
