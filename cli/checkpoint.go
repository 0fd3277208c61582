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
)

// runCheckpoint implements "dqnflow checkpoint export|verify|list".
func runCheckpoint(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: want \"dqnflow checkpoint export|verify|list ...\"", errUsage)
	}
	switch args[0] {
	case "export":
		return runCheckpointExport(e, args[1:])
	case "verify":
		return runCheckpointVerify(e, args[1:])
	case "list":
		return runCheckpointList(ctx, e, args[1:])
	}
	return fmt.Errorf("%w: unknown checkpoint command %q: want export, verify or list", errUsage, args[0])
}

func runCheckpointExport(e *env, args []string) error {
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
	ck, _, err := readCheckpoint(*ckPath)
	if err != nil {
		return err
	}
	exp, rep, err := checkpoint.Export(ck, dt, "online.")
	if err != nil {
		return fmt.Errorf("export %s as %s: %w", *ckPath, *dtype, err)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("create directory for %s: %w", *out, err)
	}
	info, err := checkpoint.Write(*out, exp)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s: %d tensors, %d values as %s, %d bytes, sha256 %s\n", info.Path, rep.Tensors, rep.Values, dt, info.Bytes, info.SHA256)
	if dt == checkpoint.F16 {
		fmt.Fprintf(e.stdout, "f16: %d overflowed to Inf, %d flushed to zero, %d became subnormal\n", rep.Overflow, rep.FlushedToZero, rep.Subnormal)
	}
	return nil
}

func runCheckpointVerify(e *env, args []string) error {
	fs := newFlags(e, "checkpoint verify")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want \"dqnflow checkpoint verify FILE\"", errUsage)
	}
	_, info, err := readCheckpoint(fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "ok %s: %d bytes, sha256 %s, run %s, epoch %s, step %s, precision %s\n",
		info.Path, info.Bytes, info.SHA256, info.Meta[checkpoint.MetaRunID], info.Meta[checkpoint.MetaEpoch],
		info.Meta[checkpoint.MetaGlobalStep], info.Meta[checkpoint.MetaPrecision])
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

// readCheckpoint loads and verifies the checkpoint at path: a file, or an
// object s3://bucket/key of the checkpoint store that --checkpoint-store's
// environment default names (DQNFLOW_CHECKPOINT_STORE, which carries the
// endpoint; the credentials come from the AWS variables or files).
func readCheckpoint(path string) (*checkpoint.Checkpoint, checkpoint.Info, error) {
	if !strings.HasPrefix(path, "s3://") {
		return checkpoint.Read(path)
	}
	ctx := context.Background()
	loc := defaultCheckpointStore()
	s, err := checkpoint.OpenStore(ctx, loc)
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
