package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalCommandsConfineConfigPathsButReadTypedOnes: a data.path that a
// config file names is confined to the data roots (the working directory
// by default), and readable once --data-root names its directory; a path
// typed with --data is read wherever it lies (ADR 0029); a worker whose
// data root does not exist fails at start, before it connects to
// anything. The file is a price file with a bad row, so "read" shows as
// that row's error.
func TestLocalCommandsConfineConfigPathsButReadTypedOnes(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(csv, []byte("time,open,high,low,close\n2024-01-01 00:00,1,2,0.5,1.5\n2024-01-01 01:00,1,0.5,2,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "cfg.json")
	if err := os.WriteFile(cfg, []byte(`{"data": {"path": "`+filepath.ToSlash(csv)+`"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DQNFLOW_DATA_ROOTS", "")
	cases := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"train", "--config", cfg}, 1, []string{"data path " + csv, "outside the root", "--data-root"}},
		{[]string{"train", "--config", cfg, "--data-root", dir}, 1, []string{"bad.csv:3:", "below low"}},
		{[]string{"train", "--data", csv}, 1, []string{"bad.csv:3:", "below low"}},
		{[]string{"evaluate", "--data", ", " + csv, "--out", filepath.Join(dir, "eval")}, 1, []string{"bad.csv:3:", "below low"}},
		{[]string{"backtest", "--checkpoint", csv, "--data", csv, "--data-root", filepath.Join(dir, "missing")}, 2, []string{"--data-root", "missing: no such directory"}},
		{[]string{"worker", "--data-root", filepath.Join(dir, "missing")}, 2, []string{"--data-root", "missing: no such directory"}},
		{[]string{"train", "--data", csv, "--data-limits", "bytes=10"}, 1, []string{"over the size limit", "--data-limits"}},
	}
	for _, c := range cases {
		_, errOut, code := run(t, c.args...)
		if code != c.code {
			t.Errorf("dqnflow %s: exit %d, want %d: %s", strings.Join(c.args, " "), code, c.code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("dqnflow %s: %q does not say %q", strings.Join(c.args, " "), strings.TrimSpace(errOut), w)
			}
		}
	}
}
