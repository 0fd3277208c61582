package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dqnflow/dqnflow/bench/pytorch"
	"github.com/dqnflow/dqnflow/files"
)

// PyTorch is the PyTorch CPU reference timed beside the CPU backend in
// one "dqnflow bench --device cpu" run: bench/pytorch/bench.py with the
// same batch size and thread count.
type PyTorch struct {
	// Status is "ok", "skipped" (no python3 with torch, or --pytorch off)
	// or "error".
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	Python string `json:"python,omitempty"`
	Torch  string `json:"torch,omitempty"`
	Device string `json:"device,omitempty"`
	// Threads is torch.get_num_threads() after torch.set_num_threads.
	Threads  int              `json:"threads,omitempty"`
	Variants []PyTorchVariant `json:"variants,omitempty"`
}

// PyTorchVariant is one variant's result, and ours against it.
type PyTorchVariant struct {
	Variant   string  `json:"variant"`
	Status    string  `json:"status"`
	MsPerStep float64 `json:"ms_per_step,omitempty"`
	StepsPerS float64 `json:"steps_per_s,omitempty"`
	// Speedup is our train steps/s over PyTorch's: ≥ 1 means we are faster.
	Speedup float64 `json:"speedup,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// torchCheck prints torch's version, or fails when python has no torch.
const torchCheck = "import torch; print(torch.__version__)"

// maxPyTorchResultBytes bounds the result file bench.py writes: a few
// kilobytes of JSON.
const maxPyTorchResultBytes = 16 << 20

// ProbeTorch returns torch's version as python reports it, or why python
// cannot import torch.
func ProbeTorch(ctx context.Context, python string) (string, error) {
	vctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(vctx, python, "-c", torchCheck).Output()
	if err != nil {
		return "", fmt.Errorf("%s cannot import torch (%v); install PyTorch or pass --python", python, err)
	}
	return trimNL(out), nil
}

// runPyTorch runs the PyTorch CPU reference with python at batch size
// batch on threads threads, given ProbeTorch's result (version, probeErr):
// with mode "auto" a python without torch is a skip with the reason, with
// "on" an error, and "off" skips. Its progress goes to stderr.
func runPyTorch(ctx context.Context, stderr io.Writer, mode, python, version string, probeErr error, batch, threads int, ourStepsPerS float64) (*PyTorch, error) {
	res := &PyTorch{Python: python}
	skip := func(reason string) (*PyTorch, error) {
		if mode == "on" {
			return nil, fmt.Errorf("--pytorch on: %s", reason)
		}
		res.Status, res.Reason = "skipped", reason
		return res, nil
	}
	if mode == "off" {
		return skip("--pytorch off")
	}
	if probeErr != nil {
		return skip(probeErr.Error())
	}
	dir, err := os.MkdirTemp("", "dqnflow-pytorch-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"bench.py", "dqn.py"} {
		b, err := pytorch.Scripts.ReadFile(name)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return nil, err
		}
	}
	outPath := filepath.Join(dir, "pytorch.json")
	cmd := exec.CommandContext(ctx, python, filepath.Join(dir, "bench.py"), "--device", "cpu",
		"--threads", strconv.Itoa(threads), "--batches", strconv.Itoa(batch), "--out", outPath)
	// The same thread count for every pool torch may use; the process
	// inherits our CPU affinity, so it runs on the same cores.
	n := strconv.Itoa(threads)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS="+n, "MKL_NUM_THREADS="+n, "OPENBLAS_NUM_THREADS="+n, "PYTHONUNBUFFERED=1")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	fmt.Fprintf(stderr, "pytorch: %s (torch %s), %d threads, batch %d\n", python, version, threads, batch)
	runErr := cmd.Run()
	var doc struct {
		Env struct {
			Torch   string `json:"torch"`
			Threads int    `json:"threads"`
			Device  struct {
				Name string `json:"name"`
			} `json:"device"`
		} `json:"env"`
		Aborted any `json:"aborted"`
		Results []struct {
			Variant   string  `json:"variant"`
			Batch     int     `json:"batch"`
			Status    string  `json:"status"`
			MsPerStep float64 `json:"ms_per_step"`
			StepsPerS float64 `json:"steps_per_s"`
			Error     string  `json:"error"`
			Reason    string  `json:"reason"`
		} `json:"results"`
	}
	b, err := files.ReadFile(outPath, maxPyTorchResultBytes)
	if err != nil {
		res.Status, res.Reason = "error", fmt.Sprintf("bench.py wrote no result (%v, exit: %v)", err, runErr)
		return res, nil
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("pytorch result %s: %w", outPath, err)
	}
	res.Status, res.Torch, res.Threads, res.Device = "ok", doc.Env.Torch, doc.Env.Threads, doc.Env.Device.Name
	if doc.Aborted != nil {
		res.Status, res.Reason = "error", fmt.Sprint(doc.Aborted)
	}
	for _, r := range doc.Results {
		v := PyTorchVariant{Variant: r.Variant, Status: r.Status, MsPerStep: r.MsPerStep, StepsPerS: r.StepsPerS, Error: r.Error + r.Reason}
		if r.StepsPerS > 0 {
			v.Speedup = ourStepsPerS / r.StepsPerS
		}
		res.Variants = append(res.Variants, v)
	}
	return res, nil
}

func trimNL(b []byte) string {
	s := string(b)
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}
