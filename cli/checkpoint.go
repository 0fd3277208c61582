package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// checkpointCmd is "dqnflow checkpoint export|verify|list|keygen".
func checkpointCmd(e *env) *cobra.Command {
	return group("checkpoint", "checkpoints: export, verify, list, keygen",
		"checkpoint exports inference weights, verifies checkpoint files, lists a run's checkpoints and makes the key that signs them.",
		checkpointExportCmd(e), checkpointVerifyCmd(e), checkpointListCmd(e), checkpointKeygenCmd(e))
}

// checkpointExportCmd is "dqnflow checkpoint export".
func checkpointExportCmd(e *env) *cobra.Command {
	cmd := leaf("export",
		"write inference weights as f32, bf16 or f16",
		"export writes the online network's weights of a checkpoint as an inference safetensors file in f32, bf16 (round to nearest even) or f16 (refused when a weight would overflow).",
		"dqnflow checkpoint export --checkpoint ck.safetensors --dtype bf16 --out weights-bf16.safetensors")
	fs := cmd.Flags()
	ckPath := fs.String("checkpoint", "", "checkpoint file (.safetensors)")
	dtype := fs.String("dtype", "f32", "f32, bf16 or f16")
	flagValues(fs, "dtype", "f32", "bf16", "f16")
	out := fs.String("out", "", "output file (.safetensors)")
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
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
	return cmd
}

// checkpointVerifyCmd is "dqnflow checkpoint verify FILE".
func checkpointVerifyCmd(e *env) *cobra.Command {
	cmd := leaf("verify FILE",
		"check a checkpoint file's format and SHA-256",
		"verify reads a checkpoint (a file, or s3://bucket/key of $DQNFLOW_CHECKPOINT_STORE), checks its format and hash, that every tensor of its model is present and finite and, with --checkpoint-key-file, its signature, and prints its run, epoch, step and precision.",
		"dqnflow checkpoint verify checkpoints/run-1/.../epoch-000010.safetensors",
		"dqnflow checkpoint verify --checkpoint-key-file checkpoint.key.pub epoch-000010.safetensors")
	e.ckpt.register(cmd.Flags())
	cmd.Args = argsBetween(1, 1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		_, info, err := readCheckpoint(cmd.Context(), e, args[0])
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
	return cmd
}

// checkpointKeygenCmd is "dqnflow checkpoint keygen --out FILE".
func checkpointKeygenCmd(e *env) *cobra.Command {
	cmd := leaf("keygen",
		"make an Ed25519 key pair that signs and verifies checkpoints",
		"keygen writes a new Ed25519 private key (mode 0600: the workers that write checkpoints sign with it) and its public key beside it as FILE.pub (readers verify with it); pass either to --checkpoint-key-file.",
		"dqnflow checkpoint keygen --out /etc/dqnflow/checkpoint.key   # then: dqnflow worker --checkpoint-key-file /etc/dqnflow/checkpoint.key")
	fs := cmd.Flags()
	out := fs.String("out", "", "private key file to create (mode 0600); the public key goes to FILE.pub")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
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
	return cmd
}

// checkpointListCmd is "dqnflow checkpoint list RUN [--json]" from
// the metadata in PostgreSQL (DATABASE_URL).
func checkpointListCmd(e *env) *cobra.Command {
	cmd := leaf("list RUN",
		"a run's checkpoints from the metadata store",
		"list prints a run's checkpoints from the metadata store: epoch, step, validation Sharpe, best and pruned marks, SHA-256 and URI.",
		"dqnflow checkpoint list run-20261201-120000-ab12cd34",
		"dqnflow checkpoint list RUN --json | jq '.[] | select(.is_best)'")
	fs := cmd.Flags()
	jsonOut := fs.Bool("json", false, "print a JSON array")
	cmd.Args = argsBetween(1, 1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		st, err := openReader(ctx, e)
		if err != nil {
			return err
		}
		defer st.Close()
		cks, err := st.ListCheckpoints(ctx, args[0])
		if err != nil {
			return err
		}
		if *jsonOut {
			if cks == nil {
				cks = []metadata.CheckpointRecord{}
			}
			return jsonfile.Print(e.stdout, cks)
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
	return cmd
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
	s, err := openCheckpointStore(ctx, loc, opt)
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
