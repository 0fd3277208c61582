package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeIsStrictAndRoundTrips feeds arbitrary bytes to Decode. It must
// never panic; a rejection wraps ErrInvalid and names the input; an
// accepted config passes Validate and survives its own JSON unchanged
// (what the workflow stores with the run and in every checkpoint decodes
// to the config that ran). Seeds: testdata/fuzz/FuzzDecodeIsStrictAndRoundTrips
// and the f.Add calls.
func FuzzDecodeIsStrictAndRoundTrips(f *testing.F) {
	for _, s := range []string{
		"{}",
		"",
		`{"epochs": 3, "optim": {"lr": 0.0003}}`,
		`{"seed": 18446744073709551615, "device": "cuda:1", "precision": "bf16-mixed"}`,
		`{"data": {"path": "synthetic", "synthetic_bars": 3000, "valid_bars": 500}}`,
		`{"checkpoint": {"every": 1, "keep_last": 2, "dir": "ck"}}`,
		`{"epochs": -1}`,
		`{"epochs": 1.5}`,
		`{"unknown": 1}`,
		`{"epochs": 2} trailing`,
		`{"model": {"atoms": 51, "v_min": 10, "v_max": -10}}`,
		"{\"epochs\":\n\"x\"}",
		string(Defaults().JSON()),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		const name = "fuzz.json"
		c, err := Decode(name, raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("rejection does not wrap ErrInvalid: %v", err)
			}
			if !strings.HasPrefix(err.Error(), name+": ") {
				t.Fatalf("rejection does not name the input %q: %v", name, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Decode accepted a config that Validate refuses: %v", err)
		}
		again, err := Decode("round trip", c.JSON())
		if err != nil {
			t.Fatalf("the accepted config's own JSON is refused: %v\n%s", err, c.JSON())
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("config changed through its JSON:\nfirst  %+v\nsecond %+v", c, again)
		}
	})
}
