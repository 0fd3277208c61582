package gpu

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/devenv"
	"github.com/dqnflow/dqnflow/gpu/internal/gputest"
	"github.com/dqnflow/dqnflow/gpu/step"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/replay"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/policy"
	"github.com/dqnflow/dqnflow/trainer/rollout"
)

// deviceTrainer builds a CUDA trainer for cfg on ds, or skips without a GPU.
func deviceTrainer(t *testing.T, cfg config.RunConfig, ds *market.Dataset) *Trainer {
	t.Helper()
	b := testBackend(t, gputest.Tuning(t))
	cfg.Device = "cuda"
	tr, err := b.New(context.Background(), cfg, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr.(*Trainer)
}

// realConfig is the default run on the bundled S&P 500 hours, with the
// turnover penalty and the risk aversion on so that every term of the
// reward is exercised.
func realConfig(envs int) config.RunConfig {
	cfg := config.Defaults()
	cfg.Precision = config.PrecisionFP32
	cfg.Env.NumEnvs = envs
	cfg.Env.TurnoverPenalty = 0.01
	cfg.Env.RewardScale = 1.5
	cfg.Env.RiskAversion = 0.05
	cfg.Env.EpsilonStart, cfg.Env.EpsilonEnd = 0, 0
	return cfg
}

// scripted is the action of env i at step s: a hash, so that every
// direction, size and exit rule, reversals, adds and stop changes occur.
func scripted(s, i int) market.Action {
	h := devenv.Mix64(uint64(s)<<32 ^ uint64(i))
	return market.Action{Dir: int(h % 3), Size: int(h >> 8 % 4), Exit: int(h >> 16 % 3)}
}

// relErr is |a − b| / max(|a|, |b|), 0 when both are equal.
func relErr(a, b float64) float64 {
	if a == b {
		return 0
	}
	return math.Abs(a-b) / math.Max(math.Abs(a), math.Abs(b))
}

// TestDeviceEnvironmentMatchesMarket gives the CPU environment
// (sim.VecEnv and the rollout collector) and the device environment the
// same windows and the same actions for a whole episode on the bundled
// S&P 500 data: rewards, agent features and equity agree within 1e-9
// relative, and the transitions written to the replay buffers are equal bit
// for bit.
// It runs twice: with the instrument's constant slippage and with
// per-bar slippage (Dataset.Slip, as bars with bid and ask give it).
func TestDeviceEnvironmentMatchesMarket(t *testing.T) {
	for _, perBar := range []bool{false, true} {
		t.Run(slipName(perBar), func(t *testing.T) {
			cfg := realConfig(96)
			ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if perBar {
				ds = withBarSlip(ds)
			}
			deviceEnvironmentMatchesMarket(t, cfg, ds, nil)
		})
	}
}

// TestDevicePanelEnvironmentMatchesMarket is TestDeviceEnvironmentMatchesMarket
// on a joined panel (market.JoinPanel) of three series with three
// instruments and cost models: the bundled S&P 500 hours (ES), the
// bundled bitcoin hours (BTC) and a synthetic series ("bps", with per-bar
// slippage). Over the first episode the device and sim.VecEnv agree
// as there; at its end every environment's new window is the one
// panelStart's draws give (recomputed on the host from the same
// counter-based stream and market.SegmentCumulative), lies inside one
// series, and every series is drawn.
func TestDevicePanelEnvironmentMatchesMarket(t *testing.T) {
	const envs = 96
	cfg := realConfig(envs)
	ctx := context.Background()
	var parts []*market.Dataset
	for _, path := range []string{cfg.Data.Path, "bundled:bitcoin_2024.csv", prices.SyntheticPath} {
		c := cfg
		c.Data.Path = path
		c.Data.SyntheticBars = 6000
		ds, err := market.Prepare(ctx, prices.Source{}, c)
		if err != nil {
			t.Fatal(err)
		}
		if path == prices.SyntheticPath {
			ds = withBarSlip(ds)
		}
		parts = append(parts, ds)
	}
	panel, err := market.JoinPanel([]string{"S&P 500", "bitcoin", "synthetic"}, parts, "", cfg.Env.EpisodeBars)
	if err != nil {
		t.Fatal(err)
	}
	segs := panel.Segments
	deviceEnvironmentMatchesMarket(t, cfg, panel, func(c *cuda.Ctx, d *devenv.Collector, steps int) error {
		st, err := d.Env.State(c)
		if err != nil {
			return err
		}
		key := devenv.StreamKey(cfg.Seed, rollout.StreamEnv)
		cum := market.SegmentCumulative(segs)
		l := d.Env.WindowLen
		drawn := make([]int, len(segs))
		for i := range envs {
			want := hostPanelStart(key, int64(steps), i, envs, segs, cum, l)
			start, end := int(st.Env.Start[i]), int(st.Env.End[i])
			if start != want || end != start+l {
				return fmt.Errorf("env %d: device window [%d, %d) after the first episode, panelStart on the host gives [%d, %d)", i, start, end, want, want+l)
			}
			k := market.SegmentOf(segs, start)
			if k < 0 || market.SegmentOf(segs, end-1) != k {
				return fmt.Errorf("env %d: device window [%d, %d) crosses series", i, start, end)
			}
			drawn[k]++
		}
		for k, n := range drawn {
			if n == 0 {
				return fmt.Errorf("no environment drew series %s (windows per series %v)", segs[k].Name, drawn)
			}
		}
		t.Logf("windows per series after the first episode: %v", drawn)
		return nil
	})
}

// hostPanelStart is kernels/env.cu's panelStart on the host: the segment
// from uniform01(key, c, n+i) against cum, then the start in it from
// uniform01(key, c, i).
func hostPanelStart(key uint64, c int64, i, n int, segs []market.Segment, cum []float64, l int) int {
	uniform01 := func(k int) float64 {
		x := devenv.Mix64(key ^ devenv.Mix64(uint64(c)*0x9e3779b97f4a7c15+uint64(k)))
		return float64(x>>11) * (1.0 / 9007199254740992.0)
	}
	from, to := segs[0].From, segs[len(segs)-1].To
	if len(segs) > 1 {
		u := uniform01(n + i)
		k := len(segs) - 1
		for j, cj := range cum {
			if u < cj {
				k = j
				break
			}
		}
		from, to = segs[k].From, segs[k].To
	}
	s := from
	if free := to - from - l; free > 0 {
		s += int(uniform01(i) * float64(free+1))
	}
	return s
}

// slipName names the slippage of a sub-test.
func slipName(perBar bool) string {
	if perBar {
		return "per-bar slippage"
	}
	return "constant slippage"
}

// withBarSlip is ds with per-bar slippage (Dataset.Slip) that varies from
// half to one and a half times the instrument's constant at each bar's
// open, as half a quoted spread would.
func withBarSlip(ds *market.Dataset) *market.Dataset {
	out := *ds
	in := ds.Instrument
	out.Slip = make([]float64, ds.Bars.Len())
	for t, o := range ds.Bars.Open {
		u := float64(devenv.Mix64(uint64(t))>>11) / (1 << 53)
		out.Slip[t] = (in.SlippageTicks*in.TickSize + in.SlippageBps*1e-4*math.Abs(o)) * (0.5 + u)
	}
	return &out
}

// deviceEnvironmentMatchesMarket plays one episode of scripted actions
// in cfg.Env.NumEnvs environments on ds on both sides and compares them;
// after, when not nil, then runs on the device thread with the collector
// and the episode's step count.
func deviceEnvironmentMatchesMarket(t *testing.T, cfg config.RunConfig, ds *market.Dataset, after func(c *cuda.Ctx, d *devenv.Collector, steps int) error) {
	envs := cfg.Env.NumEnvs
	tr := deviceTrainer(t, cfg, ds)
	ctx := context.Background()

	// The CPU side: a collector writing into a CPU replay buffer, and a
	// bare environment in the same state for the per-step results.
	col, err := rollout.New(cfg, ds)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := col.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	start, err := rollout.ReadState(&checkpoint.Checkpoint{Tensors: ts}, envs, cfg.Optim.NStep)
	if err != nil {
		t.Fatal(err)
	}
	env, err := sim.NewVecEnv(ds, ds.Train, envs, cfg.Env.EpisodeBars, rand.New(rand.NewPCG(9, 9)))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.SetState(start.Env); err != nil {
		t.Fatal(err)
	}
	if err := env.SetReward(sim.ShapeOf(cfg.Env)); err != nil {
		t.Fatal(err)
	}
	buf, err := replay.New(cfg.Replay)
	if err != nil {
		t.Fatal(err)
	}

	l, d := tr.l, tr.col
	steps := min(cfg.Env.EpisodeBars, ds.Train.Len()) - 1 // one whole episode: every env starts at its window's first bar
	var maxReward, maxAgent, maxPnL, maxEquity float64
	equityCPU, equityDev := make([]float64, envs), make([]float64, envs)
	var devRes sim.StepResult
	var took []int32
	// The device thread runs this function: failures return errors (a
	// t.Fatal there would end the device's goroutine).
	err = tr.do(func(c *cuda.Ctx) error {
		if err := d.Load(c, l, &checkpoint.Checkpoint{Tensors: ts}); err != nil {
			return err
		}
		if err := d.Begin(c, l.Replay); err != nil {
			return err
		}
		acts := make([]market.Action, envs)
		given := make([]int32, 3*envs)
		var res sim.StepResult
		for s := range steps {
			for i := range acts {
				acts[i] = scripted(s, i)
				given[3*i], given[3*i+1], given[3*i+2] = int32(acts[i].Dir), int32(acts[i].Size), int32(acts[i].Exit)
			}
			if err := env.Step(acts, &res); err != nil {
				return err
			}
			if _, err := col.Collect(ctx, 1, func(_ []float32, rows int, dst []market.Action) error {
				copy(dst, acts[:rows])
				return nil
			}, buf); err != nil {
				return err
			}
			if err := d.StepGiven(c, l, given); err != nil {
				return err
			}
			var err error
			if devRes, took, err = d.StepResult(c); err != nil {
				return err
			}
			for i := range envs {
				if a := acts[i]; took[3*i] != int32(a.Dir) || took[3*i+1] != int32(a.Size) || took[3*i+2] != int32(a.Exit) {
					return fmt.Errorf("step %d env %d: the device took %v, was given %+v (ε is 0)", s, i, took[3*i:3*i+3], a)
				}
				if devRes.Done[i] != res.Done[i] {
					return fmt.Errorf("step %d env %d: done %v on the device, %v on the CPU", s, i, devRes.Done[i], res.Done[i])
				}
				maxReward = math.Max(maxReward, relErr(float64(devRes.Reward[i]), float64(res.Reward[i])))
				maxPnL = math.Max(maxPnL, relErr(devRes.PnL[i], res.PnL[i]))
				equityCPU[i] += res.PnL[i]
				equityDev[i] += devRes.PnL[i]
				maxEquity = math.Max(maxEquity, relErr(ds.Instrument.InitialCapital+equityDev[i], ds.Instrument.InitialCapital+equityCPU[i]))
				for k := range step.AgentW {
					j := i*step.AgentW + k
					maxAgent = math.Max(maxAgent, relErr(float64(devRes.NextAgent[j]), float64(res.NextAgent[j])))
				}
			}
		}
		if _, err := d.Finish(c, l, steps); err != nil {
			return err
		}
		if after != nil {
			return after(c, d, steps)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d envs × %d steps (one episode) on %s: max relative error reward %.3g, agent features %.3g, step P&L %.3g, equity %.3g",
		envs, steps, ds.Bars.Name, maxReward, maxAgent, maxPnL, maxEquity)
	for _, e := range []struct {
		name string
		v    float64
	}{{"reward", maxReward}, {"agent features", maxAgent}, {"step P&L", maxPnL}, {"equity", maxEquity}} {
		if !(e.v <= 1e-9) {
			t.Errorf("%s: max relative error %g > 1e-9", e.name, e.v)
		}
	}

	var got replay.Storage
	if err := tr.do(func(c *cuda.Ctx) error {
		var err error
		got, err = l.Replay.Storage(c, l)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := buf.Storage()
	t.Logf("replay: %d transitions on the device, %d on the CPU", got.Size, want.Size)
	if got.Size != want.Size || got.Cursor != want.Cursor || got.Size == 0 {
		t.Fatalf("replay size %d cursor %d on the device, size %d cursor %d on the CPU", got.Size, got.Cursor, want.Size, want.Cursor)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		for i := 0; i < got.Size; i++ {
			g, w := transitionAt(got, i), transitionAt(want, i)
			if g != w {
				t.Fatalf("replay slot %d: device %+v, CPU %+v", i, g, w)
			}
		}
		t.Fatalf("replay storage differs outside the transitions (masses or maximum priority)")
	}
}

// transitionAt is slot i of s.
func transitionAt(s replay.Storage, i int) replay.Transition {
	tr := replay.Transition{Bar: s.Bar[i], Return: s.Return[i], Discount: s.Discount[i], NextBar: s.NextBar[i],
		Action: [3]int32{s.Action[3*i], s.Action[3*i+1], s.Action[3*i+2]}}
	copy(tr.Agent[:], s.Agent[i*step.AgentW:(i+1)*step.AgentW])
	copy(tr.NextAgent[:], s.NextAgent[i*step.AgentW:(i+1)*step.AgentW])
	return tr
}

// judge replays the device's actions through sim.Backtest and asks a
// reference policy, at every bar, what it would do on the same
// observation: a bar differs when it answers otherwise. For the CPU
// policy it also measures how close that bar was to the decision's
// boundary in its Q values (a tie within rounding is close to 0): the gap
// between the two actions' Q, or, when one of two directions is flat,
// how far the other's advantage over flat is from the greedy margin
// (model.Greedy).
type judge struct {
	rec    devenv.RecordedPolicy
	ref    rollout.Greedy
	q      func(obs []float32, dst []float32) error // nil: no gaps
	margin float32
	bars   int
	diff   int
	first  int
	maxGap float64
	err    error
	refAct [1]market.Action
	qv     []float32
}

func (j *judge) Act(t int, obs []float32) market.Action {
	a := j.rec.Act(t, obs)
	j.bars++
	if err := j.ref(obs, 1, j.refAct[:]); err != nil && j.err == nil {
		j.err = err
	}
	if b := j.refAct[0]; b != a {
		j.diff++
		if j.first < 0 {
			j.first = t
		}
		if j.q != nil {
			if j.qv == nil {
				j.qv = make([]float32, 10)
			}
			if err := j.q(obs, j.qv); err != nil && j.err == nil {
				j.err = err
			}
			off := 0
			for d, n := range market.BranchSizes {
				x, y := [3]int{a.Dir, a.Size, a.Exit}[d], [3]int{b.Dir, b.Size, b.Exit}[d]
				gap := math.Abs(float64(j.qv[off+x] - j.qv[off+y]))
				if d == 0 && x != y && (x == model.FlatDir || y == model.FlatDir) {
					pos := x + y - model.FlatDir
					gap = math.Abs(float64(j.qv[pos]-j.qv[model.FlatDir]) - float64(j.margin))
				}
				j.maxGap = math.Max(j.maxGap, gap)
				off += n
			}
		}
	}
	return a
}

// TestDeviceBacktestMatchesHost runs the greedy backtest of the validation
// range on the device and compares it, on the same weights, with the host
// environment driven by the device network one row at a time and by the
// CPU policy of the checkpoint. It reports how many bars' actions differ
// on the same observation (ties within rounding: the device backtest's
// forward pass sums in another order than the GEMMs), and checks that the
// metrics agree within 1e-6 when no bar differs, that in fp32 every
// difference is a tie (Q gap ≤ 1e-4), and that the kernel's own equity
// curve equals the report's within 1e-9 relative. It does so with the
// plain argmax and with a greedy margin over flat (env.flat_margin) at
// the median advantage of the positions the CPU policy's plain argmax
// takes on the range's flat observations, so that the margin turns some
// of them flat.
//
// The fp32 run is repeated with per-bar slippage (Dataset.Slip).
func TestDeviceBacktestMatchesHost(t *testing.T) {
	for _, run := range []struct {
		precision string
		perBar    bool
	}{{config.PrecisionFP32, false}, {config.PrecisionBF16Mixed, false}, {config.PrecisionFP32, true}} {
		precision := run.precision
		t.Run(precision+", "+slipName(run.perBar), func(t *testing.T) {
			cfg := realConfig(32)
			cfg.Precision = precision
			cfg.Env.EpsilonStart, cfg.Env.EpsilonEnd = 1, 0.05
			ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if run.perBar {
				ds = withBarSlip(ds)
			}
			tr := deviceTrainer(t, cfg, ds)
			ctx := context.Background()
			// One short epoch, so that the policy is not the initial one.
			if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Train(ctx, 50, nil); err != nil {
				t.Fatal(err)
			}
			ck, err := tr.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			margins := []float64{0}
			if median, ok := medianAdvantage(t, ck, ds, ds.Valid); ok {
				margins = append(margins, median/cfg.Env.RewardScale)
			} else {
				t.Errorf("the plain argmax is flat on every bar of the range: the margin is not exercised")
			}
			for _, margin := range margins {
				c := cfg
				c.Env.FlatMargin = margin
				t.Run(fmt.Sprintf("flat_margin=%.4g", margin), func(t *testing.T) {
					tr.l.Margin = c.GreedyMargin() // the margin the trainer of config c would have
					compareBacktests(t, tr, ds, ds.Valid, withConfig(t, ck, c), c.GreedyMargin())
				})
			}
			tr.l.Margin = cfg.GreedyMargin()
		})
	}
}

// medianAdvantage is the median advantage over flat, Q(position) − Q(flat),
// of the positions that the plain argmax of ck's CPU policy takes on the
// flat observations of bars r (agent features 0); false when it takes
// none.
func medianAdvantage(t *testing.T, ck *checkpoint.Checkpoint, ds *market.Dataset, r market.Range) (float64, bool) {
	t.Helper()
	pol, err := policy.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	obs := make([]float32, r.Len()*market.ObsDim)
	for i := range r.Len() {
		copy(obs[i*market.ObsDim:], ds.Features[(r.From+i)*market.NumFeatures:(r.From+i+1)*market.NumFeatures])
	}
	q := make([]float32, r.Len()*model.NumActions)
	if err := pol.QValues(obs, r.Len(), q); err != nil {
		t.Fatal(err)
	}
	var adv []float64
	for i := range r.Len() {
		qi := q[i*model.NumActions : (i+1)*model.NumActions]
		if a := model.Greedy(qi, 0); a.Dir != model.FlatDir {
			adv = append(adv, float64(qi[a.Dir]-qi[model.FlatDir]))
		}
	}
	if len(adv) == 0 {
		return 0, false
	}
	slices.Sort(adv)
	return adv[len(adv)/2], true
}

// withConfig is ck with cfg as its stored config.
func withConfig(t *testing.T, ck *checkpoint.Checkpoint, cfg config.RunConfig) *checkpoint.Checkpoint {
	t.Helper()
	meta := maps.Clone(ck.Meta)
	meta[checkpoint.MetaConfig] = string(cfg.JSON())
	return &checkpoint.Checkpoint{Meta: meta, Tensors: ck.Tensors}
}

// compareBacktests is the body of TestDeviceBacktestMatchesHost for one
// greedy margin: tr's device backtest of bars r against the host
// environment driven by tr's network and by the CPU policy of ck.
func compareBacktests(t *testing.T, tr *Trainer, ds *market.Dataset, r market.Range, ck *checkpoint.Checkpoint, margin float32) {
	defer func(k bool) { tr.bt.Kernel = k }(tr.bt.Kernel)
	for _, kernel := range []bool{false, true} {
		tr.bt.Kernel = kernel
		compareBacktest(t, tr, ds, r, ck, margin)
	}
}

// compareBacktest is compareBacktests for the trainer's backtest mode
// (batched or kernel).
func compareBacktest(t *testing.T, tr *Trainer, ds *market.Dataset, r market.Range, ck *checkpoint.Checkpoint, margin float32) {
	ctx := context.Background()
	precision := tr.cfg.Precision
	dev, err := tr.Backtest(ctx, ds, r)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.bt.Kernel {
		st := tr.bt.LastStats
		precision += " batched"
		t.Logf("%s: %d decisions from %d rows in %d calls", precision, st.Decisions, st.Evaluated, st.Rounds)
		if st.Decisions != len(st.Actions) || st.Rounds < 1 || st.Rounds > st.Decisions {
			t.Errorf("batched backtest stats %d decisions, %d actions, %d calls", st.Decisions, len(st.Actions), st.Rounds)
		}
		acts := make([]int32, 0, 3*len(st.Actions))
		for _, a := range st.Actions {
			acts = append(acts, int32(a.Dir), int32(a.Size), int32(a.Exit))
		}
		judgeBacktest(t, tr, ds, r, ck, margin, dev, acts, precision)
		return
	}
	devActs := append([]int32(nil), tr.bt.HostAct[:3*tr.bt.LastBars]...)
	decisions, usedCluster := tr.bt.LastBars, tr.bt.Cluster
	var maxEq float64
	for i, e := range dev.Equity {
		maxEq = math.Max(maxEq, relErr(tr.bt.LastEq[i], e))
	}
	if usedCluster {
		// The one-block kernel computes every row as the cluster's
		// blocks do: the same actions and the same report.
		tr.bt.OneBlock = true
		one, err := tr.Backtest(ctx, ds, r)
		tr.bt.OneBlock = false
		if err != nil {
			t.Fatal(err)
		}
		same := tr.bt.LastBars == len(devActs)/3
		for i := 0; same && i < len(devActs); i++ {
			same = tr.bt.HostAct[i] == devActs[i]
		}
		if w, f := metricsErr(one.Metrics, dev.Metrics); !same || w != 0 {
			t.Errorf("bt_run and bt_run_cluster differ: same actions %v, metrics %g (%s)", same, w, f)
		}
	}
	t.Logf("%s: backtest kernel bt_run_cluster %v", precision, usedCluster)
	t.Logf("%s: %d bars, %d decisions, Sharpe %.4f, %d trades; kernel equity against the report's: max relative error %.3g",
		precision, r.Len(), decisions, dev.Sharpe, dev.Trades, maxEq)
	if !(maxEq <= 1e-9) {
		t.Errorf("the kernel's equity differs from the report's by %g relative", maxEq)
	}
	judgeBacktest(t, tr, ds, r, ck, margin, dev, devActs, precision)
}

// judgeBacktest replays the device backtest's actions devActs (report dev)
// against the host environment driven by the device network and by the
// CPU policy of ck, bar by bar on the same observations.
func judgeBacktest(t *testing.T, tr *Trainer, ds *market.Dataset, r market.Range, ck *checkpoint.Checkpoint, margin float32, dev sim.Report, devActs []int32, precision string) {
	pol, err := policy.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []struct {
		name string
		g    rollout.Greedy
		q    func(obs []float32, dst []float32) error
	}{
		{"the device network with the host environment", nil, nil},
		{"the CPU policy (" + pol.Precision() + ")", pol.Greedy, func(obs []float32, dst []float32) error { return pol.QValues(obs, 1, dst) }},
	} {
		var refRep, judged sim.Report
		j := &judge{rec: devenv.RecordedPolicy{From: r.From, Acts: devActs}, q: ref.q, margin: margin, first: -1}
		err := tr.do(func(c *cuda.Ctx) error {
			g := ref.g
			if g == nil {
				g = func(obs []float32, rows int, dst []market.Action) error { return tr.l.Greedy(c, obs, rows, dst) }
			}
			j.ref = g
			var err error
			if refRep, err = rollout.Backtest(ds, r, g); err != nil {
				return err
			}
			judged, err = sim.Backtest(ds, r, j)
			return err
		})
		if err == nil {
			err = j.err
		}
		if err == nil {
			err = j.rec.Err
		}
		if err != nil {
			t.Fatal(err)
		}
		if jm, _ := metricsErr(judged.Metrics, dev.Metrics); jm != 0 {
			t.Errorf("replaying the device's actions gives other metrics (%g)", jm)
		}
		worst, field := metricsErr(dev.Metrics, refRep.Metrics)
		t.Logf("%s, margin %.4g, against %s: %d of %d bars' actions differ on the same observation (first at bar %d, largest Q gap %.3g); metrics max relative error %.3g (%s)",
			precision, margin, ref.name, j.diff, j.bars, j.first, j.maxGap, worst, field)
		if j.diff == 0 && !(worst <= 1e-6) {
			t.Errorf("the same actions, yet %s differs by %g relative", field, worst)
		}
		if precision == config.PrecisionFP32 && ref.q != nil && j.maxGap > 1e-4 {
			t.Errorf("a bar differs with a Q gap of %g: not a tie within rounding", j.maxGap)
		}
	}
}

// metricsErr is the largest relative difference between the numeric
// fields of a and b, and its field.
func metricsErr(a, b sim.Metrics) (float64, string) {
	var ma, mb map[string]any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	_ = json.Unmarshal(ja, &ma)
	_ = json.Unmarshal(jb, &mb)
	worst, field := 0.0, ""
	for k, va := range ma {
		x, ok1 := va.(float64)
		y, ok2 := mb[k].(float64)
		if !ok1 || !ok2 {
			continue
		}
		if e := relErr(x, y); e > worst {
			worst, field = e, k
		}
	}
	return worst, field
}

// TestCollectorThroughput measures the device collector with thousands of
// environments, policy inference included (ε at its floor, so the network
// runs every step), against the target of 50 M environment steps/s
// with 4096 or more environments on one H200. It reports and does not
// fail on speed; it fails when a step is lost.
func TestCollectorThroughput(t *testing.T) {
	for _, envs := range []int{4096, 16384} {
		cfg := realConfig(envs)
		cfg.Precision = config.PrecisionBF16Mixed
		cfg.Env.EpsilonStart, cfg.Env.EpsilonEnd = 0.05, 0.05
		ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		tr := deviceTrainer(t, cfg, ds)
		const steps = 256
		before := tr.l.Replay.Size
		got, err := tr.TimeCollect(context.Background(), steps)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("collector, %d envs, bf16-mixed: %.1f M env steps/s wall, %.1f M on the device (target ≥ 50 M)",
			envs, got.EnvStepsPerS/1e6, got.DeviceEnvStepsPerS/1e6)
		if tr.l.Replay.Size <= before {
			t.Errorf("replay size %d after %d steps of %d envs, was %d", tr.l.Replay.Size, steps+1, envs, before)
		}
		// Where a collector step's time goes, launch by launch (last:
		// the profile's launches change the collector's state).
		kt, err := tr.ProfileCollect(20)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, k := range kt {
			sum += k.Us
			t.Logf("collector, %d envs: %-16s %8.1f µs  grid %s", envs, k.Name, k.Us, k.Grid)
		}
		t.Logf("collector, %d envs: launches sum to %.1f µs per step (%.1f M env steps/s)", envs, sum, float64(envs)/sum)
		tr.Close()
	}
}
