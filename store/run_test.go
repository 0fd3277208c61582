package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/metadata"
)

func testCreateRunIsIdempotent(t *testing.T, s Metadata) {
	first := newRun(t, s, metadata.NewRun{RunID: "run-1", Config: json.RawMessage(`{"seed": 7}`)})
	if first.Lineage != "run-1" || first.Status != metadata.StatusRunning || first.EpochsDone != 0 || first.FinishedAt != nil {
		t.Fatalf("new run = %+v, want lineage run-1, status running, no epochs", first)
	}
	// A retry or Continue-As-New: one row, the first config and lineage kept.
	again := newRun(t, s, metadata.NewRun{RunID: "run-1", Lineage: "other", Config: json.RawMessage(`{"seed": 8}`)})
	if n := count(t, s, "runs", "run_id = 'run-1'"); n != 1 {
		t.Fatalf("%d rows for run-1, want 1", n)
	}
	if again.Lineage != "run-1" || string(again.Config) != `{"seed": 7}` || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("after a retry the run is %+v, want the first lineage, config and creation time", again)
	}
}

func testCreateRunRejectsBadInput(t *testing.T, s Metadata) {
	ctx := context.Background()
	for _, r := range []metadata.NewRun{
		{RunID: "", Config: json.RawMessage(`{}`)},
		{RunID: "r", Config: nil},
		{RunID: "r", Config: json.RawMessage(`[1]`)},
		{RunID: "r", Config: json.RawMessage(`{"seed":`)},
	} {
		_, err := s.CreateRun(ctx, r)
		wantErrIs(t, err, metadata.ErrInvalid)
	}
	_, err := s.CreateRun(ctx, metadata.NewRun{RunID: "child", ParentRunID: "no-such-run", Config: json.RawMessage(`{}`)})
	wantErrIs(t, err, metadata.ErrNotFound)
}

func testSetRunStatus(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})

	if err := s.SetRunStatus(ctx, "r", metadata.StatusFailed, "trainer: non-finite loss"); err != nil {
		t.Fatal(err)
	}
	failed, err := s.GetRun(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if failed.Status != metadata.StatusFailed || failed.Error != "trainer: non-finite loss" || failed.FinishedAt == nil {
		t.Fatalf("failed run = %+v, want status failed, the error and a finish time", failed)
	}
	// A retry keeps the first finish time.
	if err := s.SetRunStatus(ctx, "r", metadata.StatusFailed, "trainer: non-finite loss"); err != nil {
		t.Fatal(err)
	}
	retried, _ := s.GetRun(ctx, "r")
	if !retried.FinishedAt.Equal(*failed.FinishedAt) {
		t.Fatalf("retry moved finished_at from %v to %v", failed.FinishedAt, retried.FinishedAt)
	}
	// Live again: no finish time, no error.
	if err := s.SetRunStatus(ctx, "r", metadata.StatusRunning, ""); err != nil {
		t.Fatal(err)
	}
	live, _ := s.GetRun(ctx, "r")
	if live.Status != metadata.StatusRunning || live.Error != "" || live.FinishedAt != nil {
		t.Fatalf("running again: %+v, want no error and no finish time", live)
	}

	wantErrIs(t, s.SetRunStatus(ctx, "r", "exploded", ""), metadata.ErrInvalid)
	wantErrIs(t, s.SetRunStatus(ctx, "nope", metadata.StatusCompleted, ""), metadata.ErrNotFound)
}

// testSetRunStatusStoresAnyErrorText sets a run failed with error texts
// that PostgreSQL refuses (a NUL: SQLSTATE 22021) or that no reader can
// use (invalid UTF-8, UTF-16, a megabyte): the status lands, and the
// stored text is errtext.Clean's, hand-checked for one case.
func testSetRunStatusStoresAnyErrorText(t *testing.T, s Metadata) {
	ctx := context.Background()
	for i, text := range []string{
		"bad\x00byte",
		"caf\xe9 \xc3\x28",
		"the header has: \xff\xfed\x00a\x00t\x00e\x00",
		"run r: " + strings.Repeat("\x00\xffx", 1<<20/3),
	} {
		id := fmt.Sprintf("r%d", i)
		newRun(t, s, metadata.NewRun{RunID: id})
		if err := s.SetRunStatus(ctx, id, metadata.StatusFailed, text); err != nil {
			t.Fatalf("text %d (%d bytes): %v", i, len(text), err)
		}
		r, err := s.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != metadata.StatusFailed || r.Error != errtext.Clean(text) || r.FinishedAt == nil {
			t.Errorf("text %d: run %s error %.100q (%d bytes), want failed with %.100q", i, r.Status, r.Error, len(r.Error), errtext.Clean(text))
		}
		if len(r.Error) > errtext.Limit || !utf8.ValidString(r.Error) || strings.ContainsRune(r.Error, 0) {
			t.Errorf("text %d: stored error of %d bytes is not bounded, valid, NUL-free text", i, len(r.Error))
		}
	}
	r, _ := s.GetRun(ctx, "r0")
	if r.Error != `bad\x00byte` {
		t.Errorf("stored %q, want the NUL shown as \\x00", r.Error)
	}
}

func testSetRunDevice(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})
	for range 2 { // a retry writes the same
		if err := s.SetRunDevice(ctx, "r", "cuda", "NVIDIA H200", "bf16-mixed"); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := s.GetRun(ctx, "r")
	if r.Backend != "cuda" || r.Device != "NVIDIA H200" || r.Precision != "bf16-mixed" {
		t.Fatalf("run = %+v, want cuda, NVIDIA H200, bf16-mixed", r)
	}
	wantErrIs(t, s.SetRunDevice(ctx, "nope", "cpu", "cpu", "fp32"), metadata.ErrNotFound)
}

func testListRunsFilters(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "a"})
	newRun(t, s, metadata.NewRun{RunID: "b", Lineage: "a", ParentRunID: "a"})
	newRun(t, s, metadata.NewRun{RunID: "c"})
	if err := s.SetRunStatus(ctx, "c", metadata.StatusCompleted, ""); err != nil {
		t.Fatal(err)
	}
	ids := func(f RunFilter) []string {
		t.Helper()
		runs, err := s.ListRuns(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range runs {
			out = append(out, r.RunID)
		}
		return out
	}
	for _, tc := range []struct {
		f    RunFilter
		want string
	}{
		{RunFilter{}, "[c b a]"}, // newest first
		{RunFilter{Limit: 2}, "[c b]"},
		{RunFilter{Lineage: "a"}, "[b a]"},
		{RunFilter{Status: metadata.StatusCompleted}, "[c]"},
		{RunFilter{Lineage: "a", Status: metadata.StatusCompleted}, "[]"},
	} {
		if got := fmt.Sprint(ids(tc.f)); got != tc.want {
			t.Errorf("ListRuns(%+v) = %s, want %s", tc.f, got, tc.want)
		}
	}
	if _, err := s.GetRun(ctx, "zzz"); err == nil {
		t.Fatal("GetRun of a missing run succeeded")
	} else {
		wantErrIs(t, err, metadata.ErrNotFound)
	}
}

// TestCreateRunKeysOnTheFirstExecution starts two executions under one
// workflow id, as the Temporal UI allows: the second must get a row of its
// own (run id "<workflow id>.<execution id>", its own lineage) and leave
// the first one's row as it was; a retry of either finds its own row.
func testCreateRunKeysOnTheFirstExecution(t *testing.T, s Metadata) {
	ctx := context.Background()
	first := newRun(t, s, metadata.NewRun{RunID: "same", ExecutionID: "e1", Config: json.RawMessage(`{"seed": 1}`)})
	if first.RunID != "same" || first.WorkflowID != "same" || first.ExecutionID != "e1" || first.Lineage != "same" {
		t.Fatalf("first run = %+v, want run id same of execution e1", first)
	}
	if err := s.SetRunStatus(ctx, "same", metadata.StatusCompleted, ""); err != nil {
		t.Fatal(err)
	}
	second := newRun(t, s, metadata.NewRun{RunID: "same", ExecutionID: "e2", Config: json.RawMessage(`{"seed": 2}`)})
	if second.RunID != "same.e2" || second.WorkflowID != "same" || second.ExecutionID != "e2" ||
		second.Lineage != "same.e2" || second.Status != metadata.StatusRunning || string(second.Config) != `{"seed": 2}` {
		t.Fatalf("second run = %+v, want run id same.e2 of execution e2, running, its own config and lineage", second)
	}
	old, err := s.GetRun(ctx, "same")
	if err != nil || old.Status != metadata.StatusCompleted || string(old.Config) != `{"seed": 1}` {
		t.Fatalf("first run after the second started = %+v, %v; want it unchanged (completed, seed 1)", old, err)
	}
	for _, want := range []metadata.Run{first, second} {
		again := newRun(t, s, metadata.NewRun{RunID: "same", ExecutionID: want.ExecutionID, Config: json.RawMessage(`{"seed": 3}`)})
		if again.RunID != want.RunID || !again.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("retry of execution %s found run %s, want %s", want.ExecutionID, again.RunID, want.RunID)
		}
	}
	if n := count(t, s, "runs", "workflow_id = 'same'"); n != 2 {
		t.Errorf("%d rows for workflow same, want 2", n)
	}
	// A run recorded before executions were known (no execution id) keeps
	// the old rule: one row per workflow id.
	legacy := newRun(t, s, metadata.NewRun{RunID: "legacy"})
	if again := newRun(t, s, metadata.NewRun{RunID: "legacy"}); again.RunID != "legacy" || !again.CreatedAt.Equal(legacy.CreatedAt) {
		t.Errorf("legacy retry = %+v, want the first row", again)
	}
}
