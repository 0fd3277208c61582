package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The format fixtures of package prices (prices/format_test.go says what
// each is).
var inspectFixtures = []string{
	"../prices/testdata/formats/btcusd_h1.csv",
	"../prices/testdata/formats/audchf_h4.csv",
	"../prices/testdata/formats/btcusd_h1.parquet",
	"../prices/testdata/lean/equity-aapl.zip",
	"../prices/testdata/lean/equity-vxx.zip",
	"../prices/testdata/lean/forex-eurusd.zip",
}

// TestInspectReportsEachFormat: data inspect names each fixture's format,
// its bars and times, AAPL's adjustment with the split it removed, VXX's
// missing factor file and EUR/USD's spread; with a config that the small
// AAPL slice suits it is usable (exit 0), and under the defaults every
// fixture is too short: unusable, with why, and exit 1.
func TestInspectReportsEachFormat(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.json")
	if err := os.WriteFile(small, []byte(`{"env": {"episode_bars": 16}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "data", "inspect", "--config", small, inspectFixtures[3])
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, w := range []string{
		"equity-aapl.zip: usable",
		"format      lean-equity (adjusted for splits and dividends with ../prices/testdata/lean/factor_files/aapl.csv (5 rows))",
		"bars        252, 2014-05-01 13:00 to 2014-06-20 19:00",
		"bar size    1h0m0s",
		"jumps       0 beyond 10σ",
		"unadjusted  1 beyond 10σ: 2014-06-09 13:00 ×0.143",
		"usable      yes: train 37, validation 9, test 7 bars",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("text output does not say %q:\n%s", w, out)
		}
	}

	out, errOut, code = run(t, append([]string{"data", "inspect", "--json"}, inspectFixtures...)...)
	if code != 1 || !strings.Contains(errOut, "6 of 6 paths unusable") {
		t.Errorf("exit %d, %q; want 1 and that 6 of 6 files are unusable", code, errOut)
	}
	var res []struct {
		Path     string `json:"path"`
		Format   string `json:"format"`
		Adjusted bool   `json:"adjusted"`
		Note     string `json:"note"`
		Bars     int    `json:"bars"`
		First    string `json:"first"`
		BarSize  string `json:"bar_size"`
		Spread   *struct {
			MedianBps float64 `json:"median_bps"`
			P95Bps    float64 `json:"p95_bps"`
		} `json:"spread"`
		Unadjusted *struct {
			Jumps int `json:"jumps"`
		} `json:"unadjusted"`
		Usable  bool   `json:"usable"`
		Problem string `json:"problem"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output is no JSON array: %v\n%s", err, out)
	}
	want := []struct {
		format string
		bars   int
		first  string
		size   string
	}{
		{"text", 199, "2017-05-23T00:00:00Z", "1h0m0s"},
		{"headerless", 200, "2007-08-29T20:00:00Z", "4h0m0s"},
		{"parquet", 199, "2017-05-23T00:00:00Z", "1h0m0s"},
		{"lean-equity", 252, "2014-05-01T13:00:00Z", "1h0m0s"},
		{"lean-equity", 60, "2009-01-30T14:00:00Z", "1h0m0s"},
		{"lean-forex", 200, "2007-01-01T21:00:00Z", "1h0m0s"},
	}
	if len(res) != len(want) {
		t.Fatalf("%d results, want %d", len(res), len(want))
	}
	for i, w := range want {
		r := res[i]
		if r.Path != inspectFixtures[i] || r.Format != w.format || r.Bars != w.bars || r.First != w.first || r.BarSize != w.size {
			t.Errorf("%s: %s, %d bars from %s, bar size %s; want %s, %d from %s, %s", r.Path, r.Format, r.Bars, r.First, r.BarSize, w.format, w.bars, w.first, w.size)
		}
		if r.Usable || !strings.Contains(r.Problem, "it needs at least") {
			t.Errorf("%s: usable %v, problem %q; want unusable under the defaults, too few bars", r.Path, r.Usable, r.Problem)
		}
	}
	if !res[3].Adjusted || res[3].Unadjusted == nil || res[3].Unadjusted.Jumps != 1 {
		t.Errorf("AAPL: adjusted %v, unadjusted %+v; want adjusted, one raw jump (the split)", res[3].Adjusted, res[3].Unadjusted)
	}
	if res[4].Adjusted || !strings.Contains(res[4].Note, "no factor file") {
		t.Errorf("VXX: adjusted %v, note %q; want unadjusted, saying there is no factor file", res[4].Adjusted, res[4].Note)
	}
	if s := res[5].Spread; s == nil || !(s.MedianBps > 0.5 && s.MedianBps < 2) || s.P95Bps < s.MedianBps {
		t.Errorf("EUR/USD spread %+v, want a median of about 1 bp", s)
	}
	for i, r := range res[:3] {
		if r.Spread != nil || r.Unadjusted != nil {
			t.Errorf("%s: spread or unadjusted jumps on a file without bid/ask or factors", inspectFixtures[i])
		}
	}
}

// TestInspectSaysWhyAFileIsUnusable: a bad row is reported with its line
// and the reason, the other files still inspected, and the exit is 1; a
// directory is skipped and not counted.
func TestInspectSaysWhyAFileIsUnusable(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("time,open,high,low,close\n2024-01-01 00:00,1,2,0.5,1.5\n2024-01-01 01:00,1,0.5,2,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "data", "inspect", bad, inspectFixtures[0])
	if code != 1 || !strings.Contains(errOut, "2 of 2 paths unusable") {
		t.Errorf("exit %d, %q; want 1, 2 of 2 unusable (the slice is too short for the defaults)", code, errOut)
	}
	for _, w := range []string{"bad.csv: UNUSABLE", "bad.csv:3: column \"high\": high 0.5 is below low 2", "btcusd_h1.csv: UNUSABLE", "bars        199"} {
		if !strings.Contains(out, w) {
			t.Errorf("output does not say %q:\n%s", w, out)
		}
	}
	out, errOut, code = run(t, "data", "inspect", "--json", dir, inspectFixtures[0])
	if code != 1 || !strings.Contains(errOut, "1 of 2 paths unusable") || !strings.Contains(out, `"skipped": "a directory, not a price file`) {
		t.Errorf("a directory and a file: exit %d, %q, %s; want the directory skipped, not counted", code, errOut, out)
	}
	if _, errOut, code := run(t, "data", "inspect"); code != 2 || !strings.Contains(errOut, "PATH") {
		t.Errorf("no path: exit %d, %q; want a usage error", code, errOut)
	}
	if _, errOut, code := run(t, "data", "inspect", "--jump-sigma", "0", bad); code != 2 || !strings.Contains(errOut, "--jump-sigma") {
		t.Errorf("--jump-sigma 0: exit %d, %q; want a usage error", code, errOut)
	}
}
