package activities_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/data"
	"github.com/dqnflow/dqnflow/files"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// TestOpenRefusesDataItCannotReadBeforeAnyWork: a run whose data.path
// names a file outside the worker's data roots (a valid price file,
// through an absolute path, ".." or a link), a device, or UTF-16 text
// fails OpenTrainer at once, non-retryably, naming data.path and the
// reason and none of the file's content, before any trainer is built;
// a file inside the roots trains. Before, data.path opened any file the
// worker could read and repeated its first line (issue 43).
func TestOpenRefusesDataItCannotReadBeforeAnyWork(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "data"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	btc, err := data.Open("bundled:bitcoin_2024.csv")
	if err != nil {
		t.Fatal(err)
	}
	write := func(p string, b []byte) string {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write(filepath.Join(root, "btc.csv"), btc)
	secret := write(filepath.Join(outside, "secret.csv"), append([]byte("SECRET-MARKER\n"), btc...))
	if err := os.Symlink(secret, filepath.Join(root, "link.csv")); err != nil {
		t.Fatal(err)
	}
	utf16 := []byte("\xff\xfe")
	for _, c := range btc[:200] {
		utf16 = append(utf16, c, 0)
	}
	write(filepath.Join(root, "utf16.csv"), utf16)
	roots, err := files.NewRoots(root, "/dev")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, typ, why string
	}{
		{secret, activities.ErrTypeInvalidConfig, "outside the root"},
		{"../outside/secret.csv", activities.ErrTypeInvalidConfig, "outside the root"},
		{"link.csv", activities.ErrTypeInvalidConfig, "resolves to " + secret},
		{"/dev/zero", activities.ErrTypeBadData, "a character device"},
		{"utf16.csv", activities.ErrTypeBadData, "UTF-16 (little-endian) text"},
	} {
		r := newRig(t, base, nil)
		r.a.Data, r.a.Prepare = prices.Source{Roots: roots}, nil
		cfg := testConfig()
		cfg.Data.Path = c.path
		err := r.do(r.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: cfg}, nil)
		if errType(err) != c.typ || !activities.IsFatal(err) || !strings.Contains(err.Error(), "config data.path: ") || !strings.Contains(err.Error(), c.why) {
			t.Errorf("data.path %s: %v; want %s naming data.path: %s", c.path, err, c.typ, c.why)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET-MARKER") {
			t.Errorf("data.path %s: the error repeats the file: %v", c.path, err)
		}
		if news, restores := r.backend.Counts(); news+restores != 0 {
			t.Errorf("data.path %s: a trainer was built before the refusal", c.path)
		}
	}
	for _, p := range []string{good, "btc.csv"} {
		r := newRig(t, base, nil)
		r.a.Data, r.a.Prepare = prices.Source{Roots: roots}, nil
		cfg := testConfig()
		cfg.Data.Path = p
		r.open(activities.OpenInput{Config: cfg})
		r.epoch(1)
	}
}

// TestDataThatChangedWhileReadIsRetried: a price file that grew or shrank
// while OpenTrainer read it (files.ErrChanged: still being written) is a
// retryable failure, which the activity's retry reads again; any other
// bad data ends the run (BadData).
func TestDataThatChangedWhileReadIsRetried(t *testing.T) {
	for _, c := range []struct {
		err   error
		fatal bool
	}{
		{fmt.Errorf("load bars: prices.csv: %w: it holds more than the 100 bytes it had when opened", files.ErrChanged), false},
		{&prices.ParseError{File: "prices.csv", Line: 3, Reason: "high 9 is below low 11"}, true},
	} {
		r := newRig(t, t.TempDir(), nil)
		r.a.Prepare = func(config.RunConfig) (*market.Dataset, error) { return nil, c.err }
		err := r.do(r.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: testConfig()}, nil)
		var ae *temporal.ApplicationError
		retryable := errors.As(err, &ae) && !ae.NonRetryable()
		if err == nil || activities.IsFatal(err) != c.fatal || retryable == c.fatal || !strings.Contains(err.Error(), "prices.csv") {
			t.Errorf("prepare failing with %v: %v (fatal %v, retryable %v); want fatal %v", c.err, err, activities.IsFatal(err), retryable, c.fatal)
		}
	}
}
