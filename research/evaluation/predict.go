package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// Predict writes to w, as one JSON document, for every bar of r of ds:
// its normalised features, the expected Q of every action of every
// branch evaluated with the agent flat (no position), and pol's greedy
// action; ckPath and dataPath name the checkpoint and data in its head.
func Predict(ctx context.Context, w io.Writer, pol *policy.Policy, ds *market.Dataset, r market.Range, ckPath, dataPath string) error {
	type branchQ struct {
		Direction []float32 `json:"direction"`
		Size      []float32 `json:"size"`
		Exit      []float32 `json:"exit"`
	}
	type row struct {
		Time     time.Time     `json:"time"`
		Close    float64       `json:"close"`
		Features []float32     `json:"features"`
		Q        branchQ       `json:"q"`
		Greedy   market.Action `json:"greedy"`
	}
	head := map[string]any{
		"checkpoint":    ckPath,
		"data":          dataPath,
		"feature_names": market.FeatureNames,
		"actions": map[string][]string{
			"direction": {"short", "flat", "long"},
			"size":      {"1/4", "2/4", "3/4", "4/4"},
			"exit":      {"none", "stop 1xATR", "stop 2xATR"},
		},
		"agent_state": "flat (no position)",
		// greedy is flat unless a direction's Q beats flat's by this (ADR 0014)
		"greedy_margin": pol.Margin(),
	}
	hb, err := json.Marshal(head)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s,\"bars\":[\n", hb[:len(hb)-1])
	obs := make([]float32, market.ObsDim)
	agent := make([]float32, market.NumAgentFeatures)
	q := make([]float32, market.NumDirections+market.NumSizes+market.NumExits)
	for t := r.From; t < r.To; t++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		ds.Obs(t, agent, obs)
		pol.QValues(obs, 1, q)
		rw := row{
			Time: ds.Bars.Time[t], Close: ds.Bars.Close[t],
			Features: obs[:market.NumFeatures],
			Q:        branchQ{q[:3], q[3:7], q[7:10]},
			Greedy:   pol.Act(t, obs),
		}
		b, err := json.Marshal(rw)
		if err != nil {
			return fmt.Errorf("bar %d: %w", t, err)
		}
		sep := ",\n"
		if t == r.To-1 {
			sep = "\n"
		}
		if _, err := fmt.Fprintf(w, "%s%s", b, sep); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintln(w, "]}")
	return err
}
