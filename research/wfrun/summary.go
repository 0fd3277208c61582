package wfrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/stats"
	"github.com/dqnflow/dqnflow/walkforward"
	"github.com/dqnflow/dqnflow/walkforward/summary"
)

// DefaultMaxBytes bounds the results.json that "walkforward
// summarize" reads: a study of 30 series, 20 yearly windows, 8 seeds and
// 4 baselines holds about 3.6 million daily returns, some 80 MB.
const DefaultMaxBytes = 1 << 30

// Read reads a walk-forward's results.json of at most maxBytes
// bytes; the error names the file and, for bad JSON, the byte offset.
func Read(path string, maxBytes int64) (walkforward.Output, error) {
	var res walkforward.Output
	f, err := os.Open(path)
	if err != nil {
		return res, fmt.Errorf("read results: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return res, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > maxBytes {
		return res, fmt.Errorf("read %s: larger than %d bytes (--max-bytes)", path, maxBytes)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return res, fmt.Errorf("read %s: not a walk-forward's results.json: bad JSON at byte %d: %w", path, se.Offset, err)
		case errors.As(err, &te):
			return res, fmt.Errorf("read %s: not a walk-forward's results.json: %s at byte %d: %w", path, te.Field, te.Offset, err)
		}
		return res, fmt.Errorf("read %s: not a walk-forward's results.json: %w", path, err)
	}
	if len(res.Results) == 0 {
		return res, fmt.Errorf("read %s: no results: not a walk-forward's results.json, or a study that produced none", path)
	}
	return res, nil
}

// Summarize is summary.Summarize of a study, with the trials it
// records and its config's seed for the bootstrap: the one summary that
// summary.json and the report both show.
func Summarize(res walkforward.Output) (summary.Summary, error) {
	return summary.Summarize(res.Results, summary.SummaryOptions{Trials: res.Trials.Total, Bootstrap: stats.Bootstrap{Seed: res.Config.Seed}})
}

// WriteSummary summarises a study (Summarize), writes
// summary.json and summary.md to dir and prints the headline to w.
func WriteSummary(dir string, res walkforward.Output, w io.Writer) (summary.Summary, error) {
	s, err := Summarize(res)
	if err != nil {
		return s, err
	}
	jsonPath, mdPath := filepath.Join(dir, "summary.json"), filepath.Join(dir, "summary.md")
	if err := jsonfile.Write(jsonPath, s); err != nil {
		return s, err
	}
	tmp := mdPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(s.Markdown()), 0o644); err != nil {
		return s, fmt.Errorf("write %s: %w", mdPath, err)
	}
	if err := os.Rename(tmp, mdPath); err != nil {
		return s, fmt.Errorf("write %s: %w", mdPath, err)
	}
	fmt.Fprintf(w, "%sthe summary's tables are in %s (and %s)\n", s.Headline(), mdPath, jsonPath)
	return s, nil
}
