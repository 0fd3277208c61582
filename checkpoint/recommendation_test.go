package checkpoint

import (
	"math"
	"strings"
	"testing"
)

// TestRecommendationSurvivesTheFile: what SetRecommendation records reads
// back bit for bit after Encode and Decode, for values that print with
// many digits, a NaN t and both recommendations; the other metadata is
// untouched.
func TestRecommendationSurvivesTheFile(t *testing.T) {
	for _, want := range []Recommendation{
		{ValidSharpe: 0.08812345678901234, ValidT: 0.051234567890123456, MinValidT: 2, Recommendation: RecommendFlat},
		{ValidSharpe: 19.2, ValidT: 11.2, MinValidT: 2, Recommendation: RecommendTrade},
		{ValidSharpe: -1.5e-300, ValidT: math.NaN(), MinValidT: 0.5, Recommendation: RecommendFlat},
		{ValidSharpe: -3, ValidT: -1.7, MinValidT: 0, Recommendation: RecommendTrade},
	} {
		ck := &Checkpoint{Meta: map[string]string{MetaEpoch: "7"}, Tensors: []Tensor{I64Tensor("step", []int{1}, []int64{1})}}
		SetRecommendation(ck.Meta, want)
		back, _, err := Decode(encodeBytes(t, ck))
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := ReadRecommendation(back.Meta)
		if err != nil || !ok {
			t.Fatalf("%+v: read back ok %v, err %v", want, ok, err)
		}
		same := func(a, b float64) bool {
			return math.Float64bits(a) == math.Float64bits(b) || math.IsNaN(a) && math.IsNaN(b)
		}
		if !same(got.ValidSharpe, want.ValidSharpe) || !same(got.ValidT, want.ValidT) || !same(got.MinValidT, want.MinValidT) || got.Recommendation != want.Recommendation {
			t.Errorf("read back %+v, want %+v", got, want)
		}
		if got.Flat() != (want.Recommendation == RecommendFlat) {
			t.Errorf("%+v: Flat() = %v", got, got.Flat())
		}
		if back.Meta[MetaEpoch] != "7" {
			t.Errorf("epoch %q, want 7", back.Meta[MetaEpoch])
		}
	}
}

// TestCheckpointWithoutRecommendationSaysNothing: metadata with none of
// the keys (an older checkpoint, or an epoch the run did not choose) is
// not an error and not a recommendation.
func TestCheckpointWithoutRecommendationSaysNothing(t *testing.T) {
	for _, meta := range []map[string]string{nil, {}, {MetaEpoch: "3", MetaRunID: "r"}} {
		r, ok, err := ReadRecommendation(meta)
		if ok || err != nil || r != (Recommendation{}) {
			t.Errorf("%v: %+v, ok %v, err %v: want nothing", meta, r, ok, err)
		}
	}
}

// TestMalformedRecommendationIsAnErrorNamingKeyAndValue: each bad value
// (or a missing key beside the others) is refused with an error that
// names the key and, where there is one, the value; nothing panics.
func TestMalformedRecommendationIsAnErrorNamingKeyAndValue(t *testing.T) {
	good := func() map[string]string {
		m := map[string]string{}
		SetRecommendation(m, Recommendation{ValidSharpe: 0.3, ValidT: 0.84, MinValidT: 2, Recommendation: RecommendFlat})
		return m
	}
	for _, c := range []struct {
		key, value string // value "" with del: the key is removed
		del        bool
	}{
		{key: MetaValidSharpe, value: "high"},
		{key: MetaValidSharpe, value: ""},
		{key: MetaValidT, value: "0.84x"},
		{key: MetaMinValidT, value: "-1"},
		{key: MetaMinValidT, value: "NaN"},
		{key: MetaMinValidT, value: "+Inf"},
		{key: MetaMinValidT, value: "two"},
		{key: MetaRecommendation, value: "Flat"},
		{key: MetaRecommendation, value: ""},
		{key: MetaRecommendation, value: "hold"},
		{key: MetaValidT, del: true},
		{key: MetaRecommendation, del: true},
	} {
		m := good()
		if c.del {
			delete(m, c.key)
		} else {
			m[c.key] = c.value
		}
		r, ok, err := ReadRecommendation(m)
		if err == nil || ok {
			t.Errorf("%s = %q (deleted %v): %+v, ok %v, no error", c.key, c.value, c.del, r, ok)
			continue
		}
		want := []string{`"` + c.key + `"`}
		if !c.del {
			want = append(want, `"`+c.value+`"`)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s = %q (deleted %v): error %q does not name %s", c.key, c.value, c.del, err, w)
			}
		}
	}
}
