package sim

import "fmt"

// Pool joins the reports of consecutive out-of-sample windows (a
// walk-forward evaluation) into one, as if one account had traded them in
// turn and compounded: the pooled equity starts at the first window's
// initial equity E₀ and moves by each window's per-bar returns,
//
//	P_0 = E₀,  P_i = P_{i−1}·(1 + r_i)   over the returns r of every window in order,
//
// for the agent and for buy-and-hold (flat stays at E₀). Every metric is
// then Measure's over that curve, with two exceptions: turnover is the
// bar-weighted mean of the windows' turnovers (each window's is already
// normalised by its own equity), and costs and trades add up (cost per
// trade is their ratio); buy-and-hold makes one round trip per window. A
// window that was ruined contributes its returns
// up to the ruin and flat bars after it; the pooled RuinBar is the first
// window's ruin, if any. The windows must share bars per year; the ruin
// fields name bars of their own data, so Pool keeps the first.
func Pool(reps []Report) (Report, error) {
	if len(reps) == 0 {
		return Report{}, fmt.Errorf("pool: no reports")
	}
	bpy := reps[0].BarsPerYear
	e0 := reps[0].Equity
	if len(e0) == 0 {
		return Report{}, fmt.Errorf("pool: window 0 has no equity curve")
	}
	pooled := Report{From: reps[0].From, To: reps[len(reps)-1].To, BarsPerYear: bpy, Instrument: reps[0].Instrument}
	agent := []float64{e0[0]}
	bh := []float64{e0[0]}
	pos := []int{0}
	var trades, bhTrades []Trade
	var turnover, bhTurnover, bars, costs, bhCosts, rt float64
	var ruin *Metrics
	for k, r := range reps {
		if r.BarsPerYear != bpy {
			return Report{}, fmt.Errorf("pool: window %d has %g bars per year, window 0 %g", k, r.BarsPerYear, bpy)
		}
		if len(r.Equity) < 2 || len(r.BuyAndHoldEquity) != len(r.Equity) || len(r.Positions) != len(r.Equity) {
			return Report{}, fmt.Errorf("pool: window %d: equity %d, buy-and-hold %d, positions %d values; want equal and at least 2",
				k, len(r.Equity), len(r.BuyAndHoldEquity), len(r.Positions))
		}
		for _, x := range Returns(r.Equity) {
			agent = append(agent, agent[len(agent)-1]*(1+x))
		}
		for _, x := range Returns(r.BuyAndHoldEquity) {
			bh = append(bh, bh[len(bh)-1]*(1+x))
		}
		pos = append(pos, r.Positions[1:]...)
		// Buy-and-hold is one round trip per window; its P&L is the
		// window's equity change (costs included).
		be := r.BuyAndHoldEquity
		bhTrades = append(bhTrades, Trade{Dir: 1, PnL: be[len(be)-1] - be[0]})
		trades = append(trades, r.TradeLog...)
		n := float64(len(r.Equity) - 1)
		bars += n
		turnover += r.Turnover * n
		bhTurnover += r.BuyAndHold.Turnover * n
		costs += r.Costs
		bhCosts += r.BuyAndHold.Costs
		rt += r.CostPerRoundTripBps * n
		if ruin == nil && r.RuinBar > 0 {
			m := r.Metrics
			ruin = &m
		}
	}
	pooled.Equity, pooled.Positions, pooled.TradeLog, pooled.BuyAndHoldEquity = agent, pos, trades, bh
	pooled.Metrics = Measure(agent, pos, trades, 0, bpy)
	pooled.Turnover = turnover / bars
	pooled.Costs = costs
	if pooled.Trades > 0 {
		pooled.CostPerTrade = costs / float64(pooled.Trades)
	}
	if ruin != nil {
		pooled.RuinBar, pooled.RuinTime, pooled.RuinShortfall = ruin.RuinBar, ruin.RuinTime, ruin.RuinShortfall
	}
	bhPos := make([]int, len(bh))
	for i := 1; i < len(bhPos); i++ {
		bhPos[i] = 1
	}
	pooled.BuyAndHold = Measure(bh, bhPos, bhTrades, 0, bpy)
	pooled.BuyAndHold.Turnover, pooled.BuyAndHold.Costs = bhTurnover/bars, bhCosts
	pooled.BuyAndHold.CostPerTrade = bhCosts / float64(len(reps))
	flat := make([]float64, len(agent))
	for i := range flat {
		flat[i] = e0[0]
	}
	pooled.Flat = Measure(flat, make([]int, len(flat)), nil, 0, bpy)
	pooled.CostPerRoundTripBps = rt / bars
	return pooled, nil
}
