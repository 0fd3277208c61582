package trainer

import (
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
)

// TestCheckpointMarketRefusesDropBitsBeyondTheFeatures: a normaliser whose
// drop mask names a feature that does not exist is damaged metadata, an
// error naming the key; one within the features reads back as stored.
func TestCheckpointMarketRefusesDropBitsBeyondTheFeatures(t *testing.T) {
	ck := func(drop string) *checkpoint.Checkpoint {
		return &checkpoint.Checkpoint{Meta: map[string]string{
			checkpoint.MetaInstrument: `{}`,
			checkpoint.MetaNormalizer: `{"drop": ` + drop + `}`,
		}}
	}
	if _, norm, err := CheckpointMarket(ck("3")); err != nil || norm.Drop != 3 {
		t.Errorf("drop 3: %v, %#x", err, norm.Drop)
	}
	if _, _, err := CheckpointMarket(ck("72057594037927936")); err == nil || !strings.Contains(err.Error(), checkpoint.MetaNormalizer) {
		t.Errorf("drop bit 56: %v, want an error naming %q", err, checkpoint.MetaNormalizer)
	}
}

// TestCheckpointMarketReadsTheNormalizerMode: a normaliser stored without
// a mode (every checkpoint before data.normalize) is the train-mode one; a
// causal one keeps its half-life and burn-in; a causal one without a
// half-life, or an unknown mode, is damaged metadata.
func TestCheckpointMarketReadsTheNormalizerMode(t *testing.T) {
	ck := func(norm string) *checkpoint.Checkpoint {
		return &checkpoint.Checkpoint{Meta: map[string]string{checkpoint.MetaInstrument: `{}`, checkpoint.MetaNormalizer: norm}}
	}
	if _, norm, err := CheckpointMarket(ck(`{"mean": [1], "std": [2]}`)); err != nil || norm.Causal() || norm.Mean[0] != 1 {
		t.Errorf("old normaliser: %v, mode %q", err, norm.Mode)
	}
	if _, norm, err := CheckpointMarket(ck(`{"mode": "causal", "half_life": 300, "burn_in": 500}`)); err != nil || !norm.Causal() || norm.HalfLife != 300 || norm.BurnIn != 500 {
		t.Errorf("causal normaliser: %v, %+v", err, norm)
	}
	for _, bad := range []string{`{"mode": "causal", "burn_in": 500}`, `{"mode": "ewm", "half_life": 300, "burn_in": 500}`} {
		if _, _, err := CheckpointMarket(ck(bad)); err == nil || !strings.Contains(err.Error(), checkpoint.MetaNormalizer) {
			t.Errorf("%s: %v, want an error naming %q", bad, err, checkpoint.MetaNormalizer)
		}
	}
}
