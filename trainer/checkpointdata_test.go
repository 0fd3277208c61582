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
