// Package sim trades on a market.Dataset: the training environment and
// the backtest, which share one set of trading rules.
//
// It owns:
//
//   - the trading arithmetic (execution.go): fills at the next open with
//     slippage and commission, stops inside the bar, mark to the close and
//     the final liquidation, as VecEnv's doc comment states them;
//   - VecEnv, the vectorised futures environment, with its reward
//     (RewardShape), its episode windows (WindowStart, which keeps a panel's
//     windows inside one series) and its checkpointed state (EnvState);
//   - the backtest of a Policy (Backtest, BacktestWith and the
//     benchmarks), its batched form for policies that score many rows at
//     once (BacktestBatch), and the Report it returns;
//   - the metrics of an equity curve (Measure, Sharpe, CVaR, …), daily
//     returns (DailyReturns), pooled reports (Pool), the equal-risk
//     portfolio of a panel's backtests (PanelValidation, PanelPortfolio),
//     and the rule baselines (Rules).
//
// It imports market, never the other way: what describes the data and the
// market (instruments, costs, sizing, features, Dataset, panels, the action
// space) is package market.
package sim
