package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeIsStrictAndRoundTrips feeds arbitrary bytes to Decode. It must
// never panic; a rejection wraps ErrInvalid and names the input; Decode
// accepts exactly what strictDecode (an independent statement of the
// contract: one JSON object onto the defaults, no unknown key, no wrong
// type, nothing after it) accepts and Validate passes, and then returns
// the same config; an accepted config survives its own JSON unchanged
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
		want, whyNot := strictDecode(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("rejection does not wrap ErrInvalid: %v", err)
			}
			if !strings.HasPrefix(err.Error(), name+": ") {
				t.Fatalf("rejection does not name the input %q: %v", name, err)
			}
			if whyNot == nil {
				t.Fatalf("Decode refused a config that the contract accepts: %v\n%q", err, raw)
			}
			return
		}
		if whyNot != nil {
			t.Fatalf("Decode accepted a config that the contract refuses (%v):\n%q", whyNot, raw)
		}
		if !reflect.DeepEqual(c, want) {
			t.Fatalf("Decode gave another config than the contract:\nDecode   %+v\ncontract %+v", c, want)
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

// strictDecode states the contract of Decode without its code: empty input
// (white space only) is the defaults; otherwise the input is one JSON
// value decoded onto the defaults by encoding/json with unknown fields
// disallowed, followed by nothing but white space, and the result must
// pass Validate. It returns the config, or why the contract refuses the
// input.
func strictDecode(raw []byte) (RunConfig, error) {
	type plain RunConfig // without RunConfig's UnmarshalJSON
	p := plain(Defaults())
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return RunConfig{}, err
		}
		if _, err := dec.Token(); err != io.EOF {
			return RunConfig{}, fmt.Errorf("after the JSON value: %v", err)
		}
	}
	c := RunConfig(p)
	if err := c.Validate(); err != nil {
		return RunConfig{}, err
	}
	return c, nil
}
