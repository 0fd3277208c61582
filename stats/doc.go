// Package stats owns the statistics that put an honest interval and a
// multiple-testing correction beside every Sharpe ratio dqnflow reports:
// the Sharpe ratio itself (the project's one definition; sim.Sharpe
// is this package's), its t-statistic and its standard error under
// non-normal returns, block-bootstrap percentile intervals for it and for
// any statistic of a return series (alone, paired with a baseline on the
// same bars, or jointly over several series), the automatic block length
// of Politis and White, the probabilistic and deflated Sharpe ratios of
// Bailey and López de Prado, the equal-risk portfolio of several
// risk-sized series and the portfolio weighted by each series' past
// volatility, and the share of windows an agent wins with its
// Wilson interval.
//
// Everything is pure Go in float64, imports nothing that does I/O, and is
// deterministic: randomness comes only from a Bootstrap's explicit Seed
// through math/rand/v2's PCG, and a run never depends on GOMAXPROCS.
// Bad input (a NaN or infinite return, series of different lengths, too
// few bars, a level outside (0, 1)) is an error wrapping ErrInput that
// names the argument, the position and the reason.
//
// # Units
//
// Every Sharpe ratio here is per bar, mean(r)/std(r) of simple per-bar
// returns with a zero risk-free rate and the sample (n − 1) standard
// deviation, unless a name says annual: Annualise multiplies by
// √barsPerYear, exactly as sim.Sharpe does. The probabilistic and
// deflated Sharpe ratios, the standard error and the variance of the
// trials' Sharpe ratios are all per bar; annualise only for display.
//
// # How the walk-forward summary uses it
//
// summary.Summarize (summary.json and summary.md of dqnflow
// walkforward) does what follows. For each series and test window (and
// for each year, and for the portfolio), with r the per-bar returns of
// the agent's equity on that window after costs and b those of a
// baseline on the same bars:
//
//	e, _ := stats.EstimateSharpe(r)          // SR, t = SR·√n, StdErr (Lo/Mertens)
//	boot := stats.Bootstrap{Seed: seed}      // circular blocks, 1000 resamples, 95 %, block length chosen from the data
//	iv, _ := boot.Sharpe(r)                  // percentile interval; iv.BlockLen and iv.Resamples go in the report
//	d, _ := boot.SharpeDiff(r, b)            // SR(agent) − SR(baseline), same resampled bars for both
//	annual := iv.Annualised(barsPerYear)     // for the table
//
// "The agent beats the baseline" is d.Lo > 0, not a comparison of two
// separate intervals. The portfolio's returns are WeightedPortfolio of
// the per-series returns aligned on the calendar (NaN where a series has
// no bar), with the weights InverseVolWeights takes from each
// instrument's past returns at a full position (the same for the agent
// and every baseline), or EqualRiskPortfolio where the returns are
// already sized to one target volatility; its Sharpe interval comes from
// the same Bootstrap. Over seeds, Joint resamples the seeds' return
// series on the same bars, with a statistic such as the mean of their
// Sharpe ratios.
//
// The configuration that is reported was selected among N tried (the run
// metadata records N): e.Deflated(N, v), with v the sample variance of the
// N trials' per-bar Sharpe ratios on the validation range, is the
// probability that its true Sharpe ratio exceeds what the best of N
// skill-less trials would show (the trials' own Sharpe ratios are not
// recorded, so summary.Summarize takes v = 1/n, the sampling
// variance of a skill-less trial's, unless told v). Finally ShareOfWins
// gives, for each baseline, the share of windows (or series) where the
// agent's Sharpe ratio is higher, with a Wilson interval.
//
// # How far to trust the intervals
//
// A block bootstrap's percentile interval is a little too narrow at the
// lengths a walk-forward window has: its variance estimate is biased
// down, by O(1/b) because blocks cut the dependence at their ends and by
// O(b/n) because resampled autocovariances are centred on the sample
// mean. On 1000 AR(1) returns (φ = 0.3) the 95 % interval of the Sharpe
// ratio covered the truth in 93.5 % of 2000 trials with circular blocks
// and 92.3 % with stationary ones (coverage_test.go); on iid returns its
// width is within 2 % of 2·1.96 standard errors. The automatic block
// length sees only autocorrelations beyond ±2·√(log10 n / n), so weak but
// long memory (volatility regimes lasting months) is invisible to it and
// the interval is then too narrow: with regimes of 100 bars and a per-bar
// Sharpe ratio of 0.7, half as wide as it should be
// (TestSharpeBlockLengthFollowsVolatilityClustering). For trading returns,
// whose per-bar Sharpe ratios are 0.01 to 0.1, volatility clustering
// enters the Sharpe ratio's variance with weight (SR/2)² and matters
// little; where long memory in the returns themselves is suspected, give
// Bootstrap.BlockLen (a month of bars, say) instead.
package stats
