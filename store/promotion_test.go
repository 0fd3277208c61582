package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dqnflow/dqnflow/metadata"
)

func testRecordPromotionOnce(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "base"})
	newRun(t, s, metadata.NewRun{RunID: "challenger", Lineage: "base", ParentRunID: "base"})

	p := metadata.Promotion{
		Lineage: "base", RetrainRunID: "retrain-1",
		ChallengerRunID: "challenger", ChallengerCheckpointURI: "file:///ck/challenger/0003.safetensors", ChallengerScore: ptr(0.4),
		IncumbentRunID: "base", IncumbentCheckpointURI: "file:///ck/base/0002.safetensors", IncumbentScore: ptr(0.6),
		Promoted: false, Reason: "challenger 0.4 <= incumbent 0.6",
	}
	first, err := s.RecordPromotion(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if first.ID == 0 || first.Promoted || first.IncumbentRunID != "base" || *first.IncumbentScore != 0.6 {
		t.Fatalf("first decision = %+v", first)
	}
	// A retry that would decide otherwise gets the first decision back.
	p.Promoted, p.Reason = true, "changed my mind"
	again, err := s.RecordPromotion(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.Promoted || again.Reason != first.Reason {
		t.Fatalf("retry = %+v, want the first decision %+v", again, first)
	}
	if n := count(t, s, "promotions", "retrain_run_id = 'retrain-1'"); n != 1 {
		t.Fatalf("%d promotion rows, want 1", n)
	}

	// The challenger must belong to the lineage.
	newRun(t, s, metadata.NewRun{RunID: "stranger"})
	_, err = s.RecordPromotion(ctx, metadata.Promotion{Lineage: "base", RetrainRunID: "retrain-2",
		ChallengerRunID: "stranger", ChallengerCheckpointURI: "file:///x"})
	wantErrIs(t, err, metadata.ErrInvalid)
	_, err = s.RecordPromotion(ctx, metadata.Promotion{Lineage: "base", RetrainRunID: "retrain-2",
		ChallengerRunID: "ghost", ChallengerCheckpointURI: "file:///x"})
	wantErrIs(t, err, metadata.ErrNotFound)
}

func testChampion(t *testing.T, s Metadata) {
	ctx := context.Background()
	_, err := s.Champion(ctx, "base")
	wantErrIs(t, err, metadata.ErrNotFound)

	// Before any promotion: the first run's best checkpoint.
	newRun(t, s, metadata.NewRun{RunID: "base"})
	c := checkpointAt("base", 2, "base weights")
	c.ValidSharpe = ptr(0.6)
	record(t, s, c)
	champ, err := s.Champion(ctx, "base")
	if err != nil {
		t.Fatal(err)
	}
	if champ.RunID != "base" || champ.CheckpointURI != c.URI || *champ.Score != 0.6 || champ.PromotionID != 0 ||
		champ.CheckpointSHA256 != c.SHA256 || champ.CheckpointEpoch != 2 || champ.CheckpointStep != c.GlobalStep {
		t.Fatalf("champion = %+v, want base's best checkpoint", champ)
	}

	// A challenger that lost changes nothing.
	newRun(t, s, metadata.NewRun{RunID: "ch1", Lineage: "base", ParentRunID: "base"})
	if _, err := s.RecordPromotion(ctx, metadata.Promotion{Lineage: "base", RetrainRunID: "rt1",
		ChallengerRunID: "ch1", ChallengerCheckpointURI: "file:///ch1", ChallengerScore: ptr(0.5),
		IncumbentRunID: "base", IncumbentCheckpointURI: c.URI, IncumbentScore: ptr(0.6)}); err != nil {
		t.Fatal(err)
	}
	if champ, _ = s.Champion(ctx, "base"); champ.RunID != "base" {
		t.Fatalf("champion after a lost challenge = %s, want base", champ.RunID)
	}
	// Promoted challengers take over, the latest one holding the title.
	for _, id := range []string{"ch2", "ch3"} {
		newRun(t, s, metadata.NewRun{RunID: id, Lineage: "base", ParentRunID: "base"})
		p, err := s.RecordPromotion(ctx, metadata.Promotion{Lineage: "base", RetrainRunID: "rt-" + id,
			ChallengerRunID: id, ChallengerCheckpointURI: "file:///" + id, ChallengerScore: ptr(0.9), Promoted: true,
			IncumbentRunID: champ.RunID, IncumbentCheckpointURI: champ.CheckpointURI})
		if err != nil {
			t.Fatal(err)
		}
		champ, err = s.Champion(ctx, "base")
		if err != nil || champ.RunID != id || champ.CheckpointURI != "file:///"+id || champ.PromotionID != p.ID {
			t.Fatalf("champion after promoting %s = %+v, %v", id, champ, err)
		}
	}
	// A promoted challenger whose checkpoint row exists carries its hash.
	newRun(t, s, metadata.NewRun{RunID: "ch4", Lineage: "base", ParentRunID: "base"})
	c4 := checkpointAt("ch4", 5, "ch4 weights")
	record(t, s, c4)
	if _, err := s.RecordPromotion(ctx, metadata.Promotion{Lineage: "base", RetrainRunID: "rt-ch4",
		ChallengerRunID: "ch4", ChallengerCheckpointURI: c4.URI, ChallengerScore: ptr(1.0), Promoted: true,
		IncumbentRunID: champ.RunID, IncumbentCheckpointURI: champ.CheckpointURI}); err != nil {
		t.Fatal(err)
	}
	if champ, err = s.Champion(ctx, "base"); err != nil || champ.CheckpointSHA256 != c4.SHA256 || champ.CheckpointEpoch != 5 {
		t.Fatalf("champion after promoting ch4 = %+v, %v; want its checkpoint's hash and epoch", champ, err)
	}
}

// TestPromotionComparesAgainstTheIncumbentItRead races two retrains of
// one lineage that both read the first run as champion: the first
// promotion recorded wins; the second, whose challenger was never compared
// against the new champion, must not take the title from it (compare and
// set), and its decision says why. Then the same race with the two
// promotions at once, many times: exactly one wins each time.
func testPromotionComparesAgainstTheIncumbentItRead(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "base"})
	c := checkpointAt("base", 2, "base weights")
	c.ValidSharpe = ptr(0.6)
	record(t, s, c)
	promote := func(retrain, challenger, incumbentRun, incumbentURI string) metadata.Promotion {
		t.Helper()
		p, err := s.RecordPromotion(ctx, metadata.Promotion{Lineage: "base", RetrainRunID: retrain,
			ChallengerRunID: challenger, ChallengerCheckpointURI: "file:///" + challenger, ChallengerScore: ptr(0.9),
			IncumbentRunID: incumbentRun, IncumbentCheckpointURI: incumbentURI, IncumbentScore: ptr(0.6),
			Promoted: true, Reason: "challenger 0.9 beats incumbent 0.6"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, id := range []string{"a", "b"} {
		newRun(t, s, metadata.NewRun{RunID: id, Lineage: "base", ParentRunID: "base"})
	}
	if p := promote("rt-a", "a", "base", c.URI); !p.Promoted {
		t.Fatalf("first promotion = %+v, want promoted", p)
	}
	p := promote("rt-b", "b", "base", c.URI)
	if p.Promoted || !strings.Contains(p.Reason, "champion changed") || !strings.Contains(p.Reason, "run a") {
		t.Fatalf("stale promotion = %+v, want not promoted with a reason naming the new champion a", p)
	}
	if champ, err := s.Champion(ctx, "base"); err != nil || champ.RunID != "a" {
		t.Fatalf("champion = %+v, %v; want a", champ, err)
	}
	// A retry of the stale retrain returns its decision, it does not retry
	// the comparison.
	if again := promote("rt-b", "b", "a", "file:///a"); again.ID != p.ID || again.Promoted {
		t.Fatalf("retry = %+v, want the first decision %+v", again, p)
	}
	// A lineage without a champion: a promotion that read none must find none.
	if p := promote("rt-none", "b", "", ""); p.Promoted {
		t.Fatalf("promotion that read no champion = %+v, want not promoted (a is champion)", p)
	}

	// The first retrain of a new lineage finds no champion; its challenger
	// is the lineage's first run, which the store counts as champion by
	// default once it has a best checkpoint: promoting it is no change of
	// champion.
	newRun(t, s, metadata.NewRun{RunID: "fresh", Lineage: "fresh-lineage"})
	fc := checkpointAt("fresh", 1, "fresh weights")
	fc.ValidSharpe = ptr(0.3)
	record(t, s, fc)
	if p, err := s.RecordPromotion(ctx, metadata.Promotion{Lineage: "fresh-lineage", RetrainRunID: "rt-fresh",
		ChallengerRunID: "fresh", ChallengerCheckpointURI: fc.URI, ChallengerScore: ptr(0.3),
		Promoted: true, Reason: "the lineage had no champion"}); err != nil || !p.Promoted {
		t.Fatalf("first promotion of a new lineage = %+v, %v; want promoted", p, err)
	}

	for i := range 10 {
		ids := []string{fmt.Sprintf("x%d", i), fmt.Sprintf("y%d", i)}
		champ, err := s.Champion(ctx, "base")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		got := make([]metadata.Promotion, 2)
		for j, id := range ids {
			newRun(t, s, metadata.NewRun{RunID: id, Lineage: "base", ParentRunID: "base"})
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[j] = promote("rt-"+id, id, champ.RunID, champ.CheckpointURI)
			}()
		}
		wg.Wait()
		if got[0].Promoted == got[1].Promoted {
			t.Fatalf("race %d: promoted %v and %v, want exactly one", i, got[0].Promoted, got[1].Promoted)
		}
	}
}
