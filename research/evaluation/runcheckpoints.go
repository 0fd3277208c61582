package evaluation

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/runview"
)

// RunCheckpoints backtests every checkpoint of run rec still on disk on
// the validation range, into r: mean Q for each, and for the best one
// its equity, buy-and-hold's and the actions. A file out of reach
// (another host, a pruned blob) is a note in the report, not an error; a
// failed backtest is a line on stderr, the best one's notice a line on
// stdout. The data is dataFlag, else the run's data.path; open opens a
// checkpoint on its validation range (OpenPolicyData).
func RunCheckpoints(stdout, stderr io.Writer, r *report.Run, rec runview.Record, dataFlag string, open func(uri, data string) (PolicyData, error)) {
	var cfg struct {
		Data struct {
			Path string `json:"path"`
		} `json:"data"`
	}
	json.Unmarshal(rec.Run.Config, &cfg)
	data := dataFlag
	if data == "" {
		data = cfg.Data.Path
	}
	best := rec.Best()
	if best == nil {
		r.BestNote = "The run has no checkpoint with a validation score yet."
	}
	for _, c := range rec.Checkpoints {
		if c.Pruned {
			continue
		}
		if _, err := os.Stat(c.URI); err != nil {
			if c.IsBest {
				r.BestNote = fmt.Sprintf("The best checkpoint (epoch %d) is not readable here: %v. Run the report on a host that sees the checkpoint storage.", c.Epoch, err)
			}
			continue
		}
		bt, meanQ, err := CheckpointValidation(open, c.URI, data, c.IsBest)
		if err != nil {
			fmt.Fprintf(stderr, "report: checkpoint of epoch %d: %v\n", c.Epoch, err)
			if c.IsBest {
				r.BestNote = fmt.Sprintf("The best checkpoint (epoch %d) could not be backtested: %v", c.Epoch, err)
			}
			continue
		}
		r.MeanQ = append(r.MeanQ, report.EpochValue{Epoch: c.Epoch, Value: meanQ})
		if c.IsBest {
			bt.Epoch = c.Epoch
			r.Best = bt
			if bt.Notice != "" {
				fmt.Fprintf(stdout, "best checkpoint (epoch %d): %s\n", c.Epoch, bt.Notice)
			}
		}
	}
}

// CheckpointValidation backtests the checkpoint's greedy policy on the
// validation range of data (opened by open), recording the mean expected
// Q of the chosen actions and, with path, the equity, buy-and-hold's
// equity and the actions: the report's backtest of a checkpoint.
func CheckpointValidation(open func(uri, data string) (PolicyData, error), uri, data string, path bool) (*report.Backtest, float64, error) {
	pd, err := open(uri, data)
	if err != nil {
		return nil, 0, err
	}
	return ValidationBacktest(pd.Policy, pd.Dataset, pd.Range, uri, data, path, FlatNotice(pd.Recommendation))
}
