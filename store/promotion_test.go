package store

import (
	"context"
	"testing"
)

func TestRecordPromotionOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newRun(t, s, NewRun{RunID: "base"})
	newRun(t, s, NewRun{RunID: "challenger", Lineage: "base", ParentRunID: "base"})

	p := Promotion{
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
	newRun(t, s, NewRun{RunID: "stranger"})
	_, err = s.RecordPromotion(ctx, Promotion{Lineage: "base", RetrainRunID: "retrain-2",
		ChallengerRunID: "stranger", ChallengerCheckpointURI: "file:///x"})
	wantErrIs(t, err, ErrInvalid)
	_, err = s.RecordPromotion(ctx, Promotion{Lineage: "base", RetrainRunID: "retrain-2",
		ChallengerRunID: "ghost", ChallengerCheckpointURI: "file:///x"})
	wantErrIs(t, err, ErrNotFound)
}

func TestChampion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	_, err := s.Champion(ctx, "base")
	wantErrIs(t, err, ErrNotFound)

	// Before any promotion: the first run's best checkpoint.
	newRun(t, s, NewRun{RunID: "base"})
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
	newRun(t, s, NewRun{RunID: "ch1", Lineage: "base", ParentRunID: "base"})
	if _, err := s.RecordPromotion(ctx, Promotion{Lineage: "base", RetrainRunID: "rt1",
		ChallengerRunID: "ch1", ChallengerCheckpointURI: "file:///ch1", ChallengerScore: ptr(0.5),
		IncumbentRunID: "base", IncumbentCheckpointURI: c.URI, IncumbentScore: ptr(0.6)}); err != nil {
		t.Fatal(err)
	}
	if champ, _ = s.Champion(ctx, "base"); champ.RunID != "base" {
		t.Fatalf("champion after a lost challenge = %s, want base", champ.RunID)
	}
	// Promoted challengers take over, the latest one holding the title.
	for _, id := range []string{"ch2", "ch3"} {
		newRun(t, s, NewRun{RunID: id, Lineage: "base", ParentRunID: "base"})
		p, err := s.RecordPromotion(ctx, Promotion{Lineage: "base", RetrainRunID: "rt-" + id,
			ChallengerRunID: id, ChallengerCheckpointURI: "file:///" + id, ChallengerScore: ptr(0.9), Promoted: true})
		if err != nil {
			t.Fatal(err)
		}
		champ, err = s.Champion(ctx, "base")
		if err != nil || champ.RunID != id || champ.CheckpointURI != "file:///"+id || champ.PromotionID != p.ID {
			t.Fatalf("champion after promoting %s = %+v, %v", id, champ, err)
		}
	}
	// A promoted challenger whose checkpoint row exists carries its hash.
	newRun(t, s, NewRun{RunID: "ch4", Lineage: "base", ParentRunID: "base"})
	c4 := checkpointAt("ch4", 5, "ch4 weights")
	record(t, s, c4)
	if _, err := s.RecordPromotion(ctx, Promotion{Lineage: "base", RetrainRunID: "rt-ch4",
		ChallengerRunID: "ch4", ChallengerCheckpointURI: c4.URI, ChallengerScore: ptr(1.0), Promoted: true}); err != nil {
		t.Fatal(err)
	}
	if champ, err = s.Champion(ctx, "base"); err != nil || champ.CheckpointSHA256 != c4.SHA256 || champ.CheckpointEpoch != 5 {
		t.Fatalf("champion after promoting ch4 = %+v, %v; want its checkpoint's hash and epoch", champ, err)
	}
}
