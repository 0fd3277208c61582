// Package walkforward owns the calendar walk-forward study of a panel: the
// windows (train on everything before a date, validate on the next block,
// test on the block after, rolled forward by a step), the baselines run
// on the same ranges with the same sizing and costs (flat, buy-and-hold,
// time-series momentum, the best simple rule on validation), and the
// statistics a reader judges the agent by (Sharpe ratios with block-
// bootstrap intervals per series, per year and for the equal-risk
// portfolio, t-statistics, the deflated Sharpe ratio with the number of
// configurations tried, turnover, costs, drawdowns, the share of windows
// and series where the agent beats each baseline; computed from the
// study's rows and rendered by walkforward/summary).
//
// The study's unit of record is a Result: one strategy (the agent at one
// seed, or a baseline) on one series over one window's test block, with
// its daily returns, so that any aggregate (per year, portfolio, across
// seeds) can be recomputed from the rows a store keeps.
//
// The agent of a window is one run a seed per training series, or with
// Study.Panel one run a seed on all of them joined (LocalTrainer,
// market.JoinPanel), its epoch chosen on the equal-risk portfolio of its
// validation backtests (sim.PanelValidation; ADR 0037).
package walkforward
