package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/dqnflow/dqnflow/config"
)

// MaxSweepPoints bounds a sweep's grid, so that a typo cannot start
// thousands of runs or a history too large to finish.
const MaxSweepPoints = 1000

// gridPoint is one point of a sweep grid and the config it gives.
type gridPoint struct {
	values map[string]json.RawMessage
	desc   string // "optim.lr=0.001, seed=2": the values in key order
	cfg    config.RunConfig
}

// expandGrid returns every point of grid applied to base, in a fixed order:
// keys sorted, the last key varying fastest. A grid without keys has one
// point, base itself. Each key is a JSON path into the config ("optim.lr")
// and each value the JSON to put there. An empty value list, a path through
// something that is not an object, or more than MaxSweepPoints points is an
// error; points are not validated here.
func expandGrid(base config.RunConfig, grid map[string][]json.RawMessage) ([]gridPoint, error) {
	keys := make([]string, 0, len(grid))
	n := 1
	for k, vs := range grid {
		if len(vs) == 0 {
			return nil, fmt.Errorf("grid key %q has no values", k)
		}
		keys = append(keys, k)
		if n *= len(vs); n > MaxSweepPoints {
			return nil, fmt.Errorf("grid has more than %d points", MaxSweepPoints)
		}
	}
	sort.Strings(keys)
	points := make([]gridPoint, 0, n)
	idx := make([]int, len(keys)) // odometer over the value lists
	for range n {
		p := gridPoint{values: make(map[string]json.RawMessage, len(keys))}
		desc := make([]string, len(keys))
		for j, k := range keys {
			v := grid[k][idx[j]]
			p.values[k] = v
			desc[j] = k + "=" + string(v)
		}
		p.desc = strings.Join(desc, ", ")
		cfg, err := applyValues(base, keys, p.values)
		if err != nil {
			return nil, fmt.Errorf("sweep point %d (%s): %w", len(points), p.desc, err)
		}
		p.cfg = cfg
		points = append(points, p)
		for j := len(keys) - 1; j >= 0; j-- {
			if idx[j]++; idx[j] < len(grid[keys[j]]) {
				break
			}
			idx[j] = 0
		}
	}
	return points, nil
}

// applyValues sets each JSON path of keys to its value in base's JSON and
// decodes the result as a RunConfig. An unknown leaf key is kept, so that
// RunConfig.Validate names it.
func applyValues(base config.RunConfig, keys []string, values map[string]json.RawMessage) (config.RunConfig, error) {
	raw, err := json.Marshal(base)
	if err != nil {
		return config.RunConfig{}, err
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep integers such as the seed exact
	if err := dec.Decode(&doc); err != nil {
		return config.RunConfig{}, err
	}
	for _, k := range keys {
		v := values[k]
		if !json.Valid(v) {
			return config.RunConfig{}, fmt.Errorf("grid key %q: value %q is not JSON", k, v)
		}
		parts := strings.Split(k, ".")
		obj := doc
		for i, p := range parts[:len(parts)-1] {
			next, ok := obj[p].(map[string]any)
			if !ok {
				return config.RunConfig{}, fmt.Errorf("grid key %q: %q is not a config section", k, strings.Join(parts[:i+1], "."))
			}
			obj = next
		}
		obj[parts[len(parts)-1]] = v
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return config.RunConfig{}, err
	}
	var cfg config.RunConfig
	if err := json.Unmarshal(out, &cfg); err != nil {
		return config.RunConfig{}, err
	}
	return cfg, nil
}
