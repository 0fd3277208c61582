package cli

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint/cktest"
)

// trainedCheckpoint trains the tiny config for one epoch on the CPU
// backend in dir and returns its checkpoint file; extra flags go to train.
func trainedCheckpoint(t *testing.T, dir string, extra ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"train", "--device", "cpu", "--config", tinyConfig(t, dir), "--data", "bundled:USA500IDXUSD_H1.csv", "--epochs", "1", "--out", dir}, extra...)
	runOK(t, args...)
	return filepath.Join(dir, "epoch-000001.safetensors")
}

// TestCheckpointReadersRefuseIncompleteOrNonFiniteFiles damages a real
// checkpoint of the CPU backend the ways issue 43 found `checkpoint
// export` accepting (a weight tensor left out: 19 of 20 written; a NaN in
// a weight: written to f16 as NaN) and two more (an Inf in a target
// weight, the optimiser's second moment left out), each file resealed so
// its hashes are intact. Export in every dtype, verify, predict and
// backtest must each refuse it with exit 1, naming the file, the tensor
// and, for a value, its first bad element, and export must write nothing.
func TestCheckpointReadersRefuseIncompleteOrNonFiniteFiles(t *testing.T) {
	dir := t.TempDir()
	good := trainedCheckpoint(t, dir)
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	data := "bundled:USA500IDXUSD_H1.csv"
	for _, c := range []struct {
		name   string
		damage func(path string)
		want   []string // in every refusal, beside the file's name
	}{
		{"weight tensor missing", func(p string) { cktest.DropTensor(t, p, "online.v1.bias") }, []string{"online.v1.bias", "missing"}},
		{"optimiser tensor missing", func(p string) { cktest.DropTensor(t, p, "adam.v") }, []string{"adam.v", "missing"}},
		{"NaN weight", func(p string) { cktest.SetF32(t, p, "online.s2.weight", 21, float32(math.NaN())) }, []string{"online.s2.weight", "element 21 [1, 5]", "NaN"}},
		{"Inf target weight", func(p string) { cktest.SetF32(t, p, "target.a1_0.weight", 3, float32(math.Inf(-1))) }, []string{"target.a1_0.weight", "element 3 [0, 3]", "-Inf"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "damaged.safetensors")
			if err := os.WriteFile(bad, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			c.damage(bad)
			refused := func(what string, args ...string) {
				t.Helper()
				_, errOut, code := run(t, args...)
				if code != 1 {
					t.Errorf("%s of a checkpoint with %s: exit %d, want 1 (refused)\n%s", what, c.name, code, errOut)
					return
				}
				for _, s := range append([]string{bad}, c.want...) {
					if !strings.Contains(errOut, s) {
						t.Errorf("%s refused %s without naming %q: %s", what, c.name, s, errOut)
					}
				}
			}
			for _, dt := range []string{"f32", "bf16", "f16"} {
				out := filepath.Join(t.TempDir(), "export.safetensors")
				refused("export "+dt, "checkpoint", "export", "--checkpoint", bad, "--dtype", dt, "--out", out)
				if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("export %s of a checkpoint with %s left a file: %v", dt, c.name, err)
				}
			}
			refused("verify", "checkpoint", "verify", bad)
			refused("predict", "predict", "--checkpoint", bad, "--data", data, "--json")
			refused("backtest", "backtest", "--checkpoint", bad, "--data", data)
		})
	}
	// The undamaged file passes all of them, and so do its exports.
	for _, dt := range []string{"f16", "bf16"} {
		out := filepath.Join(dir, "export-"+dt+".safetensors")
		runOK(t, "checkpoint", "export", "--checkpoint", good, "--dtype", dt, "--out", out)
		runOK(t, "checkpoint", "verify", out)
	}
	runOK(t, "predict", "--checkpoint", filepath.Join(dir, "export-bf16.safetensors"), "--data", data, "--json")
	runOK(t, "backtest", "--checkpoint", good, "--data", data)
}

// TestCheckpointKeyFileSignsAndVerifies: `checkpoint keygen` makes a key
// pair; `train --checkpoint-key-file KEY` writes signed checkpoints, which
// verify (reporting the key), backtest and export accept with the private
// key and with its public key, and with the key named only by
// $DQNFLOW_CHECKPOINT_KEY_FILE. With the key, a checkpoint written without
// it, one signed with another key and one whose metadata was changed after
// signing (its hashes recomputed) are refused by verify, backtest, predict
// and export, naming the file; nothing prints the key. A GPU worker given
// only the public key refuses to start, before it connects to anything.
func TestCheckpointKeyFileSignsAndVerifies(t *testing.T) {
	dir := t.TempDir()
	key, otherKey := filepath.Join(dir, "ck.key"), filepath.Join(dir, "other.key")
	out, _ := runOK(t, "checkpoint", "keygen", "--out", key)
	runOK(t, "checkpoint", "keygen", "--out", otherKey)
	if !strings.Contains(out, key+".pub") {
		t.Errorf("keygen output %q does not name the public key file", out)
	}
	pem, _ := os.ReadFile(key)
	secret := strings.Split(string(pem), "\n")[1] // the base64 line
	data := "bundled:USA500IDXUSD_H1.csv"
	signed := trainedCheckpoint(t, filepath.Join(dir, "signed"), "--checkpoint-key-file", key)
	unsigned := trainedCheckpoint(t, filepath.Join(dir, "unsigned"))
	foreign := trainedCheckpoint(t, filepath.Join(dir, "foreign"), "--checkpoint-key-file", otherKey)
	tampered := filepath.Join(dir, "tampered.safetensors")
	raw, _ := os.ReadFile(signed)
	if err := os.WriteFile(tampered, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cktest.ReplaceInHeader(t, tampered, `"epoch":"1"`, `"epoch":"9"`)

	var outputs []string
	for _, k := range []string{key, key + ".pub"} {
		out, _ := runOK(t, "checkpoint", "verify", "--checkpoint-key-file", k, signed)
		if !strings.Contains(out, "verified") || !strings.Contains(out, "signed with key") {
			t.Errorf("verify with %s: %q does not report the verified signature", k, out)
		}
		o, _ := runOK(t, "backtest", "--checkpoint", signed, "--data", data, "--checkpoint-key-file", k)
		outputs = append(outputs, out, o)
	}
	t.Setenv(envCheckpointKeyFile, key+".pub")
	runOK(t, "checkpoint", "verify", signed)
	exp := filepath.Join(dir, "export.safetensors")
	runOK(t, "checkpoint", "export", "--checkpoint", signed, "--dtype", "bf16", "--out", exp, "--checkpoint-key-file", key)
	runOK(t, "checkpoint", "verify", exp) // the export is signed too
	for _, c := range []struct{ name, path, want string }{
		{"unsigned", unsigned, "not signed"},
		{"another key", foreign, "signed with key"},
		{"changed after signing", tampered, "does not match"},
	} {
		for _, args := range [][]string{
			{"checkpoint", "verify", c.path},
			{"backtest", "--checkpoint", c.path, "--data", data},
			{"predict", "--checkpoint", c.path, "--data", data, "--json"},
			{"checkpoint", "export", "--checkpoint", c.path, "--dtype", "f32", "--out", filepath.Join(dir, "x.safetensors")},
		} {
			o, errOut, code := run(t, args...)
			outputs = append(outputs, o, errOut)
			if code != 1 || !strings.Contains(errOut, c.path) || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "signature refused") {
				t.Errorf("%s with a checkpoint %s: exit %d, %s; want 1 naming the file and %q", args[0], c.name, code, errOut, c.want)
			}
		}
	}
	_, errOut, code := run(t, "worker", "--role", "gpu", "--device", "cpu", "--checkpoint-key-file", key+".pub")
	if code != 2 || !strings.Contains(errOut, "needs the private key") {
		t.Errorf("a GPU worker with a public key: exit %d, %s; want 2, saying it needs the private key", code, errOut)
	}
	for _, o := range append(outputs, errOut) {
		if strings.Contains(o, secret) {
			t.Fatalf("the private key appears in the output: %s", o)
		}
	}
}
