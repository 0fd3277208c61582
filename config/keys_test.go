package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnknownKeyNamesItsLinePathAndTheNearestKey: a mistyped key is named
// with its line and column, its full path, and the known key it most
// likely meant: a near miss, a name other tools use, a key put in the
// wrong section; nothing is suggested where nothing is near.
func TestUnknownKeyNamesItsLinePathAndTheNearestKey(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{"{\n  \"epochs\": 3,\n  \"optim\": {\n    \"lr\": 1e-4,\n    \"lerning_rate\": 0.1\n  }\n}",
			`line 5 column 5: unknown key "optim.lerning_rate" (did you mean "optim.lr"?)`},
		{`{"optim": {"learning_rate": 0.1}}`, `line 1 column 12: unknown key "optim.learning_rate" (did you mean "optim.lr"?)`},
		{`{"epochz": 3}`, `line 1 column 2: unknown key "epochz" (did you mean "epochs"?)`},
		{`{"lr": 3e-4}`, `unknown key "lr" (did you mean "optim.lr"?)`},
		{`{"replay": {"capacity": 100, "batch_size": 1}}`, `line 1 column 30: unknown key "replay.batch_size" (did you mean "batch_size"?)`},
		{`{"model": {"trunk1": 16, "atom": 3}}`, `unknown key "model.atom" (did you mean "model.atoms"?)`},
		{`{"Optim": {"LR": 1e-3, "tau": 0.5}}`, `unknown key "optim.tau" (did you mean "optim.target_tau"?)`},
		{`{"checkpoint": {"every": 1}, "backtest": {"evry": 2}}`, `unknown key "backtest.evry" (did you mean "backtest.every"?)`},
		{`{"optim": {"frobnicate": 2}}`, `line 1 column 12: unknown key "optim.frobnicate"`},
	} {
		_, err := Decode("cfg.json", []byte(c.in))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%q) = %v; want an invalid-config error with %q", c.in, err, c.want)
		}
		if strings.Contains(c.want, "frobnicate") && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("Decode(%q) suggests a key where none is near: %v", c.in, err)
		}
	}
	// The workflow's input takes the same path (UnmarshalJSON, then Validate).
	var cfg RunConfig
	if err := cfg.UnmarshalJSON([]byte(`{"optim": {"lerning_rate": 0.1}}`)); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `"optim.lerning_rate" (did you mean "optim.lr"?)`) {
		t.Errorf("workflow input with a mistyped key: %v", err)
	}
}

// TestAnEmptyConfigFileIsAnError: an empty file (or /dev/null) is refused
// naming the file, where "{}" gives the defaults.
func TestAnEmptyConfigFileIsAnError(t *testing.T) {
	dir := t.TempDir()
	for _, body := range []string{"", " \n\t\n"} {
		p := filepath.Join(dir, "empty.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), p+": ") || !strings.Contains(err.Error(), "empty") {
			t.Errorf("Load of a file holding %q = %v; want an error naming %s as empty", body, err, p)
		}
	}
	if _, err := Load(os.DevNull); err == nil || !strings.Contains(err.Error(), os.DevNull) {
		t.Errorf("Load(%s) = %v; want an error naming it", os.DevNull, err)
	}
	p := filepath.Join(dir, "defaults.json")
	if err := os.WriteFile(p, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil || string(c.JSON()) != string(Defaults().JSON()) {
		t.Errorf("Load of {} = %v; want the defaults", err)
	}
}
