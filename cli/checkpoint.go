package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// runCheckpoint implements "dqnflow checkpoint export|verify|list|keygen".
func runCheckpoint(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: want \"dqnflow checkpoint export|verify|list|keygen ...\"", errUsage)
	}
	switch args[0] {
	case "export":
		return runCheckpointExport(ctx, e, args[1:])
	case "verify":
		return runCheckpointVerify(ctx, e, args[1:])
	case "list":
		return runCheckpointList(ctx, e, args[1:])
	case "keygen":
		return runCheckpointKeygen(e, args[1:])
	}
	return fmt.Errorf("%w: unknown checkpoint command %q: want export, verify, list or keygen", errUsage, args[0])
}

func runCheckpointExport(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "checkpoint export")
	ckPath := fs.String("checkpoint", "", "checkpoint file (.safetensors)")
	dtype := fs.String("dtype", "f32", "f32, bf16 or f16")
	out := fs.String("out", "", "output file (.safetensors)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := required(fs, "checkpoint", "out"); err != nil {
		return err
	}
	dt, ok := map[string]checkpoint.DType{"f32": checkpoint.F32, "bf16": checkpoint.BF16, "f16": checkpoint.F16}[strings.ToLower(*dtype)]
	if !ok {
		return fmt.Errorf("%w: flag --dtype %q: want f32, bf16 or f16", errUsage, *dtype)
	}
	ck, _, err := readCheckpoint(ctx, e, *ckPath)
	if err != nil {
		return err
	}
	exp, rep, err := policy.Export(ck, dt)
	if err != nil {
		return fmt.Errorf("export %s as %s: %w", *ckPath, *dtype, err)
	}
	opt, err := e.ckpt.options()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("create directory for %s: %w", *out, err)
	}
	info, err := checkpoint.Write(*out, exp, opt)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s: %d tensors, %d values as %s, %d bytes, sha256 %s\n", info.Path, rep.Tensors, rep.Values, dt, info.Bytes, info.SHA256)
	if dt == checkpoint.F16 {
		fmt.Fprintf(e.stdout, "f16: %d overflowed to Inf, %d flushed to zero, %d became subnormal\n", rep.Overflow, rep.FlushedToZero, rep.Subnormal)
	}
	return nil
}

func runCheckpointVerify(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "checkpoint verify")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want \"dqnflow checkpoint verify FILE\"", errUsage)
	}
	_, info, err := readCheckpoint(ctx, e, fs.Arg(0))
	if err != nil {
		return err
	}
	signed := "signature not checked (no --checkpoint-key-file)"
	if info.SignedBy != "" {
		signed = "signed with key " + info.SignedBy + ", verified"
	}
	fmt.Fprintf(e.stdout, "ok %s: %d bytes, sha256 %s, run %s, epoch %s, step %s, precision %s, every tensor of the model present and finite, %s\n",
		info.Path, info.Bytes, info.SHA256, info.Meta[checkpoint.MetaRunID], info.Meta[checkpoint.MetaEpoch],
		info.Meta[checkpoint.MetaGlobalStep], info.Meta[checkpoint.MetaPrecision], signed)
	return nil
}

// runCheckpointKeygen implements "dqnflow checkpoint keygen --out FILE".
func runCheckpointKeygen(e *env, args []string) error {
	fs := newFlags(e, "checkpoint keygen")
	out := fs.String("out", "", "private key file to create (mode 0600); the public key goes to FILE.pub")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := required(fs, "out"); err != nil {
		return err
	}
	k, err := checkpoint.GenerateKeys(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s (private: writers sign with it) and %s.pub (public: readers verify with it): key %s\n", *out, *out, k.ID())
	return nil
}

// runCheckpointList implements "dqnflow checkpoint list RUN [--json]" from
// the metadata in PostgreSQL (DATABASE_URL).
func runCheckpointList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "checkpoint list")
	jsonOut := fs.Bool("json", false, "print a JSON array")
	if err := parse(fs, reorderFlags(args), 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want \"dqnflow checkpoint list RUN [--json]\"", errUsage)
	}
	st, err := openReader(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	cks, err := st.ListCheckpoints(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if *jsonOut {
		if cks == nil {
			cks = []store.CheckpointRecord{}
		}
		return printJSON(e, cks)
	}
	fmt.Fprintf(e.stdout, "%6s %10s %8s %6s %6s  %-64s  %s\n", "epoch", "step", "sharpe", "best", "pruned", "sha256", "uri")
	for _, c := range cks {
		sharpe := "-"
		if c.ValidSharpe != nil {
			sharpe = fmt.Sprintf("%.3f", *c.ValidSharpe)
		}
		fmt.Fprintf(e.stdout, "%6d %10d %8s %6t %6t  %-64s  %s\n", c.Epoch, c.GlobalStep, sharpe, c.IsBest, c.Pruned, c.SHA256, c.URI)
	}
	return nil
}

// reorderFlags moves flags before positional arguments, so "list RUN --json"
// parses like "list --json RUN" (the flag package stops at the first
// positional argument).
func reorderFlags(args []string) []string {
	var flags, pos []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
		} else {
			pos = append(pos, a)
		}
	}
	return append(flags, pos...)
}

// readCheckpoint loads and verifies the checkpoint at path, with the
// command's checkpoint flags (size limit, key): a file, or an object
// s3://bucket/key of the checkpoint store that --checkpoint-store's
// environment default names (DQNFLOW_CHECKPOINT_STORE, which carries the
// endpoint; the credentials come from the AWS variables or files). The
// checkpoint must hold every tensor of its model (trainer.CheckComplete);
// checkpoint.Read has refused NaN and Inf.
func readCheckpoint(ctx context.Context, e *env, path string) (*checkpoint.Checkpoint, checkpoint.Info, error) {
	opt, err := e.ckpt.options()
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	ck, info, err := readCheckpointWith(ctx, path, opt)
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	if err := trainer.CheckComplete(ck); err != nil {
		return nil, checkpoint.Info{}, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	return ck, info, nil
}

func readCheckpointWith(ctx context.Context, path string, opt checkpoint.Options) (*checkpoint.Checkpoint, checkpoint.Info, error) {
	if !strings.HasPrefix(path, "s3://") {
		return checkpoint.Read(ctx, path, opt)
	}
	loc := defaultCheckpointStore()
	s, err := checkpoint.OpenStore(ctx, loc, opt)
	if err == nil && !s.Remote() {
		err = fmt.Errorf("it is a directory")
	}
	if err != nil {
		return nil, checkpoint.Info{}, fmt.Errorf("read checkpoint %s: set %s to the s3:// store it was written to (%v)", path, envCheckpointStore, err)
	}
	defer s.Close()
	ck, info, err := s.Read(ctx, path, "")
	if errors.Is(err, checkpoint.ErrOutsideRoot) {
		return nil, checkpoint.Info{}, fmt.Errorf("%w; %s names store %s", err, envCheckpointStore, s)
	}
	return ck, info, err
}
