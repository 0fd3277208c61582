// Package localrun owns a training run in this process, without Temporal
// (what "dqnflow train", evaluate and learn-check run): the data prepared
// and described, the epochs driven by trainer/epochloop with a validation
// backtest, the best checkpoint kept and its verdict recorded, the test
// range backtested once, report.json written, and the result's text.
// A run on a panel (data.series) validates and tests on the equal-risk
// portfolio of its series. It also holds what the commands that read a
// run's checkpoint share: its panel prepared again and checked, the
// portfolio backtests, flat's report.
package localrun
