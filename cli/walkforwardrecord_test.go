package cli

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/research/wfrun"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/store/storetest"
	"github.com/dqnflow/dqnflow/walkforward"
)

// TestWalkForwardRecordAndReportFromTheStore: "walkforward record DIR"
// writes the study to PostgreSQL under DIR's name, and reading it back
// gives the results.json's study, field for field (header, windows,
// plan, timings, every result); recording it again
// replaces it; "report --walkforward ID" draws the stored study with the
// same per-series rows as "report --walkforward DIR" draws from the file.
func TestWalkForwardRecordAndReportFromTheStore(t *testing.T) {
	u := storetest.Schema(t, "dqnflow_cli_wf")
	t.Setenv("DATABASE_URL", u)
	dir := filepath.Join(t.TempDir(), "wf-hand")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := handStudy(t, dir)
	// The hand-made study with a full header, as a real study writes it.
	full, err := wfrun.Read(path, wfrun.DefaultMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	full.Series = []prices.SeriesSpec{{Name: "EURUSD_H4", Path: "data/EURUSD_H4.csv"}, {Name: "GBPUSD_H4", Path: "data/GBPUSD_H4.csv", Instrument: "GBPUSD"}}
	full.Layout = walkforward.Layout{Step: walkforward.Period{Days: 30}, Test: walkforward.Period{Days: 30}, Valid: walkforward.Period{Months: 1}}
	full.Gate, full.Device, full.Seconds, full.Stopped = "window", "cpu", 12.5, "deadline after 2 of 3 windows"
	full.Notes = []string{"deadline after 2 of 3 windows"}
	full.Plan = []walkforward.SeriesWindow{{Window: 0, Series: "EURUSD_H4", Test: market.Range{From: 10, To: 40}}, {Window: 1, Series: "GBPUSD_H4", Skip: "test block too short"}}
	full.Timings = []walkforward.Timing{{Window: 0, Phase: "train", Seconds: 3.25, Count: 2}}
	for w := range 2 {
		from := time.Date(2015, 3, 4+7*w, 0, 0, 0, 0, time.UTC)
		full.Windows = append(full.Windows, walkforward.Window{Index: w, TrainFrom: from.AddDate(-1, 0, 0), ValidFrom: from.AddDate(0, -1, 0), TestFrom: from, TestTo: from.AddDate(0, 0, 30)})
	}
	if err := wfrun.WriteJSON(path, full); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, _ := runOK(t, "walkforward", "record", dir)
		if !strings.Contains(out, "recorded walk-forward study wf-hand: 2 windows, 8 results") {
			t.Errorf("record says %q, want the id, 2 windows and 8 results", out)
		}
	}
	ctx := context.Background()
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.GetWalkForward(ctx, "wf-hand")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Results) != 8 {
		t.Errorf("after two records the store holds %d results, want 8", len(rec.Results))
	}
	got, err := wfrun.StudyOutput(rec)
	if err != nil {
		t.Fatal(err)
	}
	want, err := wfrun.Read(path, wfrun.DefaultMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the stored study reads back as\n%+v\nwant results.json's\n%+v", got, want)
	}

	fromStore, fromFile := filepath.Join(t.TempDir(), "store"), filepath.Join(t.TempDir(), "file")
	out, _ := runOK(t, "report", "--walkforward", "wf-hand", "--out", fromStore)
	if !strings.Contains(out, "walk-forward wf-hand, 8 results") {
		t.Errorf("report says %q", out)
	}
	runOK(t, "report", "--walkforward", dir, "--out", fromFile)
	rows := regexp.MustCompile(`<tr><td>(EURUSD|GBPUSD)_H4</td>.*</tr>`)
	var pages [2]string
	for i, d := range []string{fromStore, fromFile} {
		b, err := os.ReadFile(filepath.Join(d, "index.html"))
		if err != nil {
			t.Fatal(err)
		}
		pages[i] = strings.Join(rows.FindAllString(string(b), -1), "\n")
		if !strings.Contains(string(b), "Walk-forward wf-hand") || len(rows.FindAllString(string(b), -1)) != 2 {
			t.Errorf("report from %s: title or the two per-series rows missing", d)
		}
		for _, png := range []string{"training-equity.png", "training-sharpe.png", "training-series-sharpe.png"} {
			if _, err := os.Stat(filepath.Join(d, png)); err != nil {
				t.Errorf("report from %s: %v", d, err)
			}
		}
	}
	if pages[0] != pages[1] {
		t.Errorf("per-series rows from the store:\n%s\nfrom the file:\n%s", pages[0], pages[1])
	}
	if b, _ := os.ReadFile(filepath.Join(fromStore, "index.html")); !strings.Contains(string(b), "the metadata store (recorded") {
		t.Error("the report of a stored study does not say it was read from the store")
	}
}

// TestWalkForwardRecordAndReportErrorsSayWhatToDo: the SQLite store
// refuses a study naming DATABASE_URL; a report of an id the store lacks
// says how to store one; --walkforward with a run id, or neither, is a
// usage error.
func TestWalkForwardRecordAndReportErrorsSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	handStudy(t, dir)
	pg := storetest.Schema(t, "dqnflow_cli_wf")
	t.Setenv("DATABASE_URL", "sqlite:"+filepath.ToSlash(filepath.Join(dir, "metadata.db")))
	_, errOut, code := run(t, "walkforward", "record", dir, "--id", "wf")
	if code == 0 || !strings.Contains(errOut, "not supported by the SQLite store") || !strings.Contains(errOut, "DATABASE_URL") {
		t.Errorf("record to SQLite: exit %d, %q; want an error saying SQLite keeps no studies and to set DATABASE_URL", code, errOut)
	}
	t.Setenv("DATABASE_URL", pg)
	runOK(t, "walkforward", "record", dir, "--id", "wf") // migrates the schema
	_, errOut, code = run(t, "report", "--walkforward", "no-such-study", "--out", filepath.Join(dir, "r"))
	if code == 0 || !strings.Contains(errOut, "no-such-study") || !strings.Contains(errOut, "walkforward record") {
		t.Errorf("report of an unknown study: exit %d, %q; want an error naming it and \"walkforward record\"", code, errOut)
	}
	for _, args := range [][]string{
		{"report", "--walkforward", "wf", "run-1", "--out", dir},
		{"report", "--out", dir},
	} {
		if _, errOut, code := run(t, args...); code == 0 || !strings.Contains(errOut, "--walkforward") {
			t.Errorf("dqnflow %s: exit %d, %q; want a usage error naming --walkforward", strings.Join(args, " "), code, errOut)
		}
	}
}
