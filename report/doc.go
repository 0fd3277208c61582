// Package report writes what `dqnflow evaluate` hands a reader: a Markdown
// page with the metrics of each series' test range beside buy-and-hold and
// flat, and PNG plots of equity and drawdown made with gonum/plot.
package report
