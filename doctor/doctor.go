// Package doctor checks what dqnflow needs and says what to do about
// each thing that fails: Temporal (server, namespace, search attributes,
// workers), the metadata store, GPUs and the libraries the CUDA backend
// loads, checkpoint signing, the checkpoint store and the Temporal CLI.
// It prints no secret: the store is named by host, port and database; no
// URL, password or key.
package doctor

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/backend"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/workflows"
)

// Options are what the checks look at, as the command line found it.
type Options struct {
	// Address and Namespace name the Temporal server; Client dials it, or
	// ClientErr says why its options could not be made.
	Address, Namespace string
	Client             client.Options
	ClientErr          error
	// CheckpointStore is the store to probe with Checkpoint's keys
	// (CheckpointErr: why the options could not be made), opened by
	// OpenCheckpointStore.
	CheckpointStore     string
	Checkpoint          checkpoint.Options
	CheckpointErr       error
	OpenCheckpointStore func(ctx context.Context, location string, opt checkpoint.Options) (*checkpoint.Store, error)
	// FindTemporal finds the Temporal CLI that "dqnflow dev" runs.
	FindTemporal func() (string, error)
	// Env names the environment variables a fix may tell the user to set.
	Env struct{ TemporalAddress, TemporalNamespace, CheckpointStore, CheckpointKeyFile string }
}

// Run runs every check, in the order they print.
func Run(ctx context.Context, o Options) []Check {
	var checks []Check
	checks = append(checks, o.checkTemporal(ctx)...)
	checks = append(checks, checkStore(ctx))
	checks = append(checks, CheckGPU()...)
	opt, keyCheck := o.checkCheckpointKey()
	checks = append(checks, keyCheck, o.checkCheckpointStore(ctx, o.CheckpointStore, opt))
	return append(checks, o.checkTemporalCLI())
}

// Failed counts the checks that failed.
func Failed(checks []Check) int {
	failed := 0
	for _, c := range checks {
		if c.Status == "fail" {
			failed++
		}
	}
	return failed
}

// Print writes the checks as lines, each fix under its check.
func Print(w io.Writer, checks []Check) {
	for _, c := range checks {
		fmt.Fprintf(w, "%-4s  %-22s %s\n", c.Status, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "      %-22s → %s\n", "", c.Fix)
		}
	}
}

// Check is one line of "dqnflow doctor".
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn or fail
	Detail string `json:"detail"`
	// Fix says what to do when Status is not ok.
	Fix string `json:"fix,omitempty"`
}

// checkTemporal checks the server, the namespace, the search attributes
// and the workers polling dqnflow's task queues.
func (o Options) checkTemporal(ctx context.Context) []Check {
	addr, ns := o.Address, o.Namespace
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	opts, err := o.Client, o.ClientErr
	if err != nil {
		return []Check{{Name: "temporal", Status: "fail", Detail: err.Error(),
			Fix: "fix the Temporal connection flags or environment named in the message"}}
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return []Check{{Name: "temporal", Status: "fail", Detail: fmt.Sprintf("%s: %v", addr, err),
			Fix: "start one with \"dqnflow dev\" (or make run), or set " + o.Env.TemporalAddress}}
	}
	defer c.Close()
	out := []Check{{Name: "temporal", Status: "ok", Detail: "server at " + addr}}
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns}); err != nil {
		return append(out, Check{Name: "temporal namespace", Status: "fail", Detail: fmt.Sprintf("%s: %v", ns, err),
			Fix: "create it (temporal operator namespace create " + ns + ") or set " + o.Env.TemporalNamespace})
	}
	out = append(out, Check{Name: "temporal namespace", Status: "ok", Detail: ns})
	attrs, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		out = append(out, Check{Name: "search attributes", Status: "warn", Detail: err.Error()})
	} else {
		var missing []string
		for name := range workflows.SearchAttributes {
			if _, ok := attrs.GetCustomAttributes()[name]; !ok {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			out = append(out, Check{Name: "search attributes", Status: "warn", Detail: "missing " + strings.Join(missing, ", ") + ": the UI cannot show epoch and best Sharpe as columns",
				Fix: "\"dqnflow dev\" registers them; on a server of your own see docs/ui.md"})
		} else {
			out = append(out, Check{Name: "search attributes", Status: "ok", Detail: "DqnEpoch, DqnBestValidSharpe, DqnStatus registered"})
		}
	}
	for _, q := range []string{workflows.ControlTaskQueue, workflows.GPUTaskQueue} {
		kind := enums.TASK_QUEUE_TYPE_WORKFLOW
		if q == workflows.GPUTaskQueue {
			kind = enums.TASK_QUEUE_TYPE_ACTIVITY
		}
		resp, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: ns, TaskQueue: &taskqueue.TaskQueue{Name: q, Kind: enums.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: kind})
		switch {
		case err != nil:
			out = append(out, Check{Name: "workers on " + q, Status: "warn", Detail: err.Error()})
		case len(resp.GetPollers()) == 0:
			out = append(out, Check{Name: "workers on " + q, Status: "warn", Detail: "no worker polls it: runs will wait",
				Fix: "start one: dqnflow worker --role " + map[bool]string{true: "gpu", false: "control"}[q == workflows.GPUTaskQueue]})
		default:
			var ids []string
			for _, p := range resp.GetPollers() {
				ids = append(ids, p.GetIdentity())
			}
			out = append(out, Check{Name: "workers on " + q, Status: "ok", Detail: fmt.Sprintf("%d: %s", len(ids), strings.Join(ids, ", "))})
		}
	}
	return out
}

// checkStore checks the metadata store that commands would use.
func checkStore(ctx context.Context) Check {
	loc, err := store.Locate(ctx, store.DefaultSQLiteFile, false)
	if err != nil {
		return Check{Name: "metadata store", Status: "warn", Detail: err.Error(), Fix: "\"dqnflow dev\" creates the SQLite file; or set DATABASE_URL"}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := store.OpenReader(ctx, loc)
	if err != nil {
		return Check{Name: "metadata store", Status: "fail", Detail: fmt.Sprintf("%s (%s): %v", loc, loc.Why, err),
			Fix: "start the server or fix DATABASE_URL"}
	}
	defer st.Close()
	if _, err := st.ListRuns(ctx, store.RunFilter{Limit: 1}); err != nil {
		return Check{Name: "metadata store", Status: "fail", Detail: fmt.Sprintf("%s: %v", loc, err), Fix: "apply the migrations: dqnflow migrate"}
	}
	return Check{Name: "metadata store", Status: "ok", Detail: fmt.Sprintf("%s (%s)", loc, loc.Why)}
}

// CheckGPU lists the CUDA devices and the libraries the CUDA backend
// loads at run time. None of them is needed on a control-plane host.
func CheckGPU() []Check {
	devs, err := cuda.Devices()
	if err != nil {
		// The whole error: the libraries and folders searched, which
		// "train" leaves to --verbose.
		return []Check{{Name: "gpu", Status: "warn", Detail: backend.Unusable(err, "the CUDA driver does not open") + ": training runs on the CPU backend here; " + err.Error(),
			Fix: "on a GPU host: install the NVIDIA driver, or set DQNFLOW_LIBCUDA"}}
	}
	if len(devs) == 0 {
		return []Check{{Name: "gpu", Status: "warn", Detail: "the CUDA driver loads but finds no device"}}
	}
	var out []Check
	v, _ := cuda.DriverVersion()
	for _, d := range devs {
		out = append(out, Check{Name: fmt.Sprintf("gpu cuda:%d", d.Ordinal), Status: "ok",
			Detail: fmt.Sprintf("%s, sm_%d%d, %d SMs, %.1f GiB, driver CUDA %d.%d", d.Name, d.Major, d.Minor, d.SMs,
				float64(d.TotalMem)/(1<<30), v/1000, v%1000/10)})
	}
	comp, err := cuda.NewCompiler()
	if err != nil {
		return append(out, Check{Name: "nvrtc", Status: "fail", Detail: errtext.FirstLine(err.Error()),
			Fix: "install the CUDA runtime libraries (NVRTC) on this GPU host"})
	}
	major, minor, _ := comp.Version()
	return append(out, Check{Name: "nvrtc", Status: "ok", Detail: fmt.Sprintf("%d.%d at %s", major, minor, comp.Path())})
}

// checkCheckpointStore checks that the checkpoint store can be written:
// a directory store as checkCheckpointDir does; an object store by writing,
// reading back (hash verified) and deleting a small checkpoint under
// .doctor/ in it.
func (o Options) checkCheckpointStore(ctx context.Context, location string, opt checkpoint.Options) Check {
	const name = "checkpoint store"
	fix := "use --checkpoint-store or " + o.Env.CheckpointStore + " to name a writable directory or s3://bucket/prefix; credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or an AWS profile"
	if opt.Keys != nil && !opt.Keys.CanSign() {
		opt.Keys = nil // the probe is written unsigned; the key check says what this key can do
	}
	s, err := o.OpenCheckpointStore(ctx, location, opt)
	if err != nil {
		return Check{Name: name, Status: "fail", Detail: err.Error(), Fix: fix}
	}
	defer s.Close()
	if !s.Remote() {
		return o.checkCheckpointDir(location)
	}
	uri, err := s.Locate(".doctor/probe.safetensors")
	if err == nil {
		ck := &checkpoint.Checkpoint{Meta: map[string]string{}, Tensors: []checkpoint.Tensor{checkpoint.U8Tensor("probe", []int{1}, []byte{1})}}
		var info checkpoint.Info
		if info, err = s.Write(ctx, uri, ck); err == nil {
			if _, _, err = s.Read(ctx, uri, info.SHA256); err == nil {
				err = s.Delete(ctx, uri)
			}
		}
	}
	if err != nil {
		return Check{Name: name, Status: "fail", Detail: err.Error(), Fix: fix}
	}
	return Check{Name: name, Status: "ok", Detail: s.String() + ": a probe object was written, read back with its SHA-256 and deleted (every worker must use this store)"}
}

// checkCheckpointKey checks the checkpoint key file (--checkpoint-key-file)
// and returns the checkpoint options to probe the store with.
func (o Options) checkCheckpointKey() (checkpoint.Options, Check) {
	const name = "checkpoint signing"
	opt, err := o.Checkpoint, o.CheckpointErr
	switch {
	case err != nil:
		return checkpoint.Options{}, Check{Name: name, Status: "fail", Detail: err.Error(),
			Fix: "name a PEM Ed25519 key with --checkpoint-key-file or " + o.Env.CheckpointKeyFile + " (dqnflow checkpoint keygen makes one)"}
	case opt.Keys == nil:
		return opt, Check{Name: name, Status: "ok", Detail: "off: checkpoints are written unsigned and read without a signature Check (--checkpoint-key-file turns it on)"}
	case !opt.Keys.CanSign():
		return opt, Check{Name: name, Status: "ok", Detail: opt.Keys.String() + ": reads accept only checkpoints it signed; a GPU worker needs the private key"}
	}
	return opt, Check{Name: name, Status: "ok", Detail: opt.Keys.String() + ": every checkpoint written is signed, every one read must be"}
}

// checkCheckpointDir checks that the default checkpoint directory under
// root can be created and written.
func (o Options) checkCheckpointDir(root string) Check {
	dir := filepath.Join(root, config.Defaults().Checkpoint.Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Check{Name: "checkpoint directory", Status: "fail", Detail: err.Error(), Fix: "use --checkpoint-store or " + o.Env.CheckpointStore + " to name a writable root"}
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		return Check{Name: "checkpoint directory", Status: "fail", Detail: fmt.Sprintf("%s is not writable: %v", dir, err),
			Fix: "use --checkpoint-store or " + o.Env.CheckpointStore + " to name a writable root"}
	}
	f.Close()
	os.Remove(f.Name())
	abs, _ := filepath.Abs(dir)
	return Check{Name: "checkpoint directory", Status: "ok", Detail: abs + " is writable (every worker must see it at this path)"}
}

// checkTemporalCLI checks for the Temporal CLI that "dqnflow dev" runs.
func (o Options) checkTemporalCLI() Check {
	p, err := o.FindTemporal()
	if err != nil {
		return Check{Name: "temporal CLI (dev)", Status: "warn", Detail: err.Error()}
	}
	return Check{Name: "temporal CLI (dev)", Status: "ok", Detail: p + " (" + runtime.GOOS + "/" + runtime.GOARCH + ")"}
}
