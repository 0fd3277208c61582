package workflows

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// TestEveryChangeHasARecordedHistory checks that each GetVersion change id
// is recorded, at its new version, in a history under testdata/, so that
// TestReplayRecordedHistories replays the patched branch (the histories
// recorded before the change replay the old one). Record the histories
// again after adding a change: go test ./workflows -run TestRecordHistories -record
func TestEveryChangeHasARecordedHistory(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]string{}
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		h, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, e := range h.GetEvents() {
			a := e.GetMarkerRecordedEventAttributes()
			if e.GetEventType() != enumspb.EVENT_TYPE_MARKER_RECORDED || a.GetMarkerName() != "Version" {
				continue
			}
			var id string
			if p := a.GetDetails()["change-id"]; p != nil {
				if err := converter.GetDefaultDataConverter().FromPayloads(p, &id); err != nil {
					t.Fatalf("%s: version marker: %v", f, err)
				}
			}
			seen[id] = append(seen[id], filepath.Base(f))
		}
	}
	for _, c := range changes {
		if len(seen[c]) == 0 {
			t.Errorf("no history under testdata/ records change %q; record them again (go test ./workflows -run TestRecordHistories -record)", c)
		}
	}
	for id := range seen {
		if !slices.Contains(changes, id) && !slices.Contains(retired, id) {
			t.Errorf("testdata/ records change %q, which workflows/version.go lists neither as live nor as retired", id)
		}
	}
}
