package market

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/prices"
)

// A panel run (data.series) as every command and the TrainingRun prepare,
// validate and record it (docs/adr/0037-panel-training.md): PreparePanel
// gives each series' own Dataset and their joined training set,
// sim.PanelValidation scores a policy on the equal-risk portfolio of the
// series' validation backtests, and Panel.Meta is what its checkpoints
// record, which CheckPanel holds the series against when a checkpoint is
// evaluated later.

// Panel is a run's panel prepared: every series of data.series with its
// own Dataset (Prepare on the series alone: its own normaliser,
// instrument, costs and ranges) and the SHA-256 of its file, and the
// training set that joins their training ranges (JoinPanel).
type Panel struct {
	Series []prices.SeriesSpec
	Parts  []*Dataset
	// SHA256 is the hex SHA-256 of each series' file as it was read ("" for
	// the synthetic series, which its seed makes).
	SHA256 []string
	Train  *Dataset
}

// Names are the series' names, in order.
func (p *Panel) Names() []string {
	out := make([]string, len(p.Series))
	for k, s := range p.Series {
		out[k] = s.Name
	}
	return out
}

// SeriesConfig is cfg on series sp alone: data.path the series' file,
// data.series empty and, when the entry names one, its instrument.
func SeriesConfig(cfg config.RunConfig, sp prices.SeriesSpec) config.RunConfig {
	cfg.Data.Path, cfg.Data.Series = sp.Path, ""
	if sp.Instrument != "" {
		cfg.Env.Instrument = sp.Instrument
	}
	return cfg
}

// PreparePanel prepares the panel of cfg.Data.Series: the entries as
// prices.ParseSeries reads them, each file read from s (inside its data roots,
// within its limits, as data.path is) and prepared by Prepare on
// SeriesConfig (the config's split applied to each series: its fractions,
// rolling window or times), and the training ranges joined by JoinPanel
// with data.weighting. Errors name the series.
func PreparePanel(ctx context.Context, s prices.Source, cfg config.RunConfig) (*Panel, error) {
	specs, err := prices.ParseSeries(cfg.Data.Series)
	if err != nil {
		return nil, fmt.Errorf("config data.series: %w", err)
	}
	p := &Panel{Series: specs, Parts: make([]*Dataset, len(specs)), SHA256: make([]string, len(specs))}
	for k, sp := range specs {
		// The digest is of a read before Prepare's: a file replaced
		// between the two is caught by CheckPanel on the next read, as
		// one replaced after training is.
		if p.SHA256[k], err = s.Digest(ctx, sp.Path); err != nil {
			return nil, fmt.Errorf("config data.series: series %s: %w", sp.Name, err)
		}
		if p.Parts[k], err = Prepare(ctx, s, SeriesConfig(cfg, sp)); err != nil {
			return nil, fmt.Errorf("config data.series: series %s: %w", sp.Name, err)
		}
	}
	if p.Train, err = JoinPanel(p.Names(), p.Parts, cfg.Data.Weighting, cfg.Env.EpisodeBars); err != nil {
		return nil, fmt.Errorf("config data.series: %w", err)
	}
	return p, nil
}

// PanelSeries is one series of a panel run as its checkpoint records it
// (checkpoint.MetaPanel): the name, the file and its SHA-256 (absent in
// checkpoints of the walk-forward study, which records its series' files
// in its own output), the first and last bar times (UTC) and bar counts
// of its training, validation and (when it has one) test ranges, and the
// name of the instrument its own Dataset trades.
type PanelSeries struct {
	Series     string    `json:"series"`
	Path       string    `json:"path,omitempty"`
	SHA256     string    `json:"sha256,omitempty"`
	TrainFrom  time.Time `json:"train_from"`
	TrainLast  time.Time `json:"train_last"`
	ValidFrom  time.Time `json:"valid_from"`
	ValidLast  time.Time `json:"valid_last"`
	TrainBars  int       `json:"train_bars"`
	ValidBars  int       `json:"valid_bars"`
	TestFrom   time.Time `json:"test_from,omitzero"`
	TestLast   time.Time `json:"test_last,omitzero"`
	TestBars   int       `json:"test_bars,omitempty"`
	Instrument string    `json:"instrument"`
}

// panelRecords are the PanelSeries of series names with Datasets parts.
func panelRecords(names []string, parts []*Dataset) ([]PanelSeries, error) {
	if len(names) != len(parts) {
		return nil, fmt.Errorf("panel: %d names for %d series", len(names), len(parts))
	}
	out := make([]PanelSeries, len(parts))
	for k, p := range parts {
		tr, va, te := p.Train, p.Valid, p.Test
		if tr.Len() < 1 || va.Len() < 1 {
			return nil, fmt.Errorf("panel series %s: training %s or validation %s is empty", names[k], tr, va)
		}
		t := p.Bars.Time
		out[k] = PanelSeries{Series: names[k], TrainFrom: t[tr.From].UTC(), TrainLast: t[tr.To-1].UTC(),
			ValidFrom: t[va.From].UTC(), ValidLast: t[va.To-1].UTC(), TrainBars: tr.Len(), ValidBars: va.Len(),
			Instrument: p.Instrument.Name}
		if te.Len() > 0 {
			out[k].TestFrom, out[k].TestLast, out[k].TestBars = t[te.From].UTC(), t[te.To-1].UTC(), te.Len()
		}
	}
	return out, nil
}

// PanelRanges is the checkpoint.MetaPanel value of a run on series names
// with Datasets parts (in the same order), without files or digests: the
// walk-forward study's.
func PanelRanges(names []string, parts []*Dataset) (string, error) {
	recs, err := panelRecords(names, parts)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(recs)
	return string(b), err
}

// Meta is the checkpoint.MetaPanel value of a run on p: every series'
// name, file, SHA-256 and ranges.
func (p *Panel) Meta() (string, error) {
	recs, err := p.records()
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(recs)
	return string(b), err
}

func (p *Panel) records() ([]PanelSeries, error) {
	recs, err := panelRecords(p.Names(), p.Parts)
	if err != nil {
		return nil, err
	}
	for k := range recs {
		recs[k].Path, recs[k].SHA256 = p.Series[k].Path, p.SHA256[k]
	}
	return recs, nil
}

// ParsePanelMeta reads a checkpoint.MetaPanel value.
func ParsePanelMeta(v string) ([]PanelSeries, error) {
	var recs []PanelSeries
	if err := json.Unmarshal([]byte(v), &recs); err != nil {
		return nil, fmt.Errorf("panel metadata: %w", err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("panel metadata: no series")
	}
	return recs, nil
}

// ErrPanelChanged marks a panel whose files or ranges are not those a
// checkpoint recorded (CheckPanel): the checkpoint's policy would be
// judged on other data than its run was trained and validated on.
var ErrPanelChanged = errors.New("the panel's data changed since the checkpoint was written")

// CheckPanel compares the panel p, prepared again from a checkpoint's
// config, with what the checkpoint recorded (recs, ParsePanelMeta): the
// same series in the same order, each file with the recorded SHA-256
// (where one was recorded) and the same training, validation and test
// ranges. Every difference is listed, naming the series and its file; the
// error wraps ErrPanelChanged.
func CheckPanel(recs []PanelSeries, p *Panel) error {
	now, err := p.records()
	if err != nil {
		return err
	}
	var diffs []string
	if got, want := p.Names(), recordNames(recs); !slices.Equal(got, want) {
		diffs = append(diffs, fmt.Sprintf("the series are now %v, the checkpoint's %v", got, want))
	} else {
		for k, r := range recs {
			n := now[k]
			switch {
			case r.SHA256 != "" && n.SHA256 != r.SHA256:
				diffs = append(diffs, fmt.Sprintf("series %s: file %s has SHA-256 %s, the checkpoint recorded %s", r.Series, n.Path, n.SHA256, r.SHA256))
			case !sameRanges(r, n):
				diffs = append(diffs, fmt.Sprintf("series %s: file %s splits into other ranges (training %s .. %s, %d bars; the checkpoint recorded %s .. %s, %d bars)",
					r.Series, n.Path, n.TrainFrom.Format(time.DateTime), n.TrainLast.Format(time.DateTime), n.TrainBars,
					r.TrainFrom.Format(time.DateTime), r.TrainLast.Format(time.DateTime), r.TrainBars))
			}
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrPanelChanged, strings.Join(diffs, "; "))
}

func recordNames(recs []PanelSeries) []string {
	out := make([]string, len(recs))
	for k, r := range recs {
		out[k] = r.Series
	}
	return out
}

// sameRanges reports whether a and b record the same ranges (a checkpoint
// written before test ranges were recorded has none to compare).
func sameRanges(a, b PanelSeries) bool {
	same := a.TrainFrom.Equal(b.TrainFrom) && a.TrainLast.Equal(b.TrainLast) && a.TrainBars == b.TrainBars &&
		a.ValidFrom.Equal(b.ValidFrom) && a.ValidLast.Equal(b.ValidLast) && a.ValidBars == b.ValidBars
	if a.TestBars == 0 {
		return same
	}
	return same && a.TestFrom.Equal(b.TestFrom) && a.TestLast.Equal(b.TestLast) && a.TestBars == b.TestBars
}
