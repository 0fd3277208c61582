package market_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/files"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// TestPreparedPanelIsCheckedAgainstItsRecord: a panel of two H4 forex
// slices prepared from data.series records each file's SHA-256 (the
// bytes' own, computed here) and ranges; the same files prepared again
// match the record, and a copy whose one bar has another volume does not, the error
// (ErrPanelChanged) naming that file and only it.
func TestPreparedPanelIsCheckedAgainstItsRecord(t *testing.T) {
	root := t.TempDir()
	var paths []string
	for _, n := range []string{"EURUSD_H4.csv", "USDJPY_H4.csv"} {
		raw, err := os.ReadFile(filepath.Join("..", "walkforward", "testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, n)
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	roots, err := files.NewRoots(root)
	if err != nil {
		t.Fatal(err)
	}
	src := prices.Source{Roots: roots}
	cfg := config.Defaults()
	cfg.Data.Path, cfg.Data.Series = "", strings.Join(paths, ",")
	cfg.Env.EpisodeBars = 64
	ctx := context.Background()
	pn, err := market.PreparePanel(ctx, src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := pn.Meta()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := market.ParsePanelMeta(meta)
	if err != nil {
		t.Fatal(err)
	}
	for k, p := range paths {
		raw, _ := os.ReadFile(p)
		sum := sha256.Sum256(raw)
		if recs[k].SHA256 != hex.EncodeToString(sum[:]) || recs[k].Path != p || recs[k].TrainBars != pn.Parts[k].Train.Len() || recs[k].TestBars != pn.Parts[k].Test.Len() {
			t.Errorf("record %d: %+v; want %s with sha256 %x", k, recs[k], p, sum)
		}
	}
	again, err := market.PreparePanel(ctx, src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := market.CheckPanel(recs, again); err != nil {
		t.Fatalf("the same files: %v", err)
	}
	raw, _ := os.ReadFile(paths[1])
	lines := strings.Split(string(raw), "\n")
	f := strings.Split(lines[100], "\t")
	f[len(f)-1] += "1" // the bar's volume: no price moves, the bytes do
	lines[100] = strings.Join(f, "\t")
	changed := []byte(strings.Join(lines, "\n"))
	if err := os.WriteFile(paths[1], changed, 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := market.PreparePanel(ctx, src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = market.CheckPanel(recs, after)
	if !errors.Is(err, market.ErrPanelChanged) || !strings.Contains(err.Error(), "file "+paths[1]+" has SHA-256") || strings.Contains(err.Error(), paths[0]) {
		t.Errorf("the volume of one bar of %s changed: %v; want ErrPanelChanged naming that file alone", paths[1], err)
	}
}
