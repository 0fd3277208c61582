package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/checkpoint/bucket"
)

// envCheckpointKeyFile is the default of --checkpoint-key-file, so that
// every command of a deployment finds the key where its secrets are
// mounted.
const envCheckpointKeyFile = "DQNFLOW_CHECKPOINT_KEY_FILE"

// checkpointFlags are the flags of every command that reads or writes
// checkpoint files: the key that signs and verifies them and the size
// limit (checkpoint.Options).
type checkpointFlags struct {
	keyFile  string
	maxBytes int64
	opt      *checkpoint.Options // loaded by options
}

// register adds the checkpoint flags to fs: every command that reads or
// writes checkpoint files calls it (train, backtest, predict, evaluate,
// walkforward, learn-check, report, doctor, dev, worker, checkpoint export
// and verify).
func (c *checkpointFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.keyFile, "checkpoint-key-file", os.Getenv(envCheckpointKeyFile),
		"PEM Ed25519 key file: a private key signs every checkpoint written and accepts only checkpoints it signed; a public key verifies only (default $"+envCheckpointKeyFile+"; none: unsigned)")
	fs.Int64Var(&c.maxBytes, "checkpoint-max-bytes", checkpoint.DefaultMaxBytes, "largest checkpoint file read or written, in bytes")
}

// options returns the checkpoint.Options the flags name, reading the key
// file the first time; a nil c (a command without the flags) gives the
// zero Options.
func (c *checkpointFlags) options() (checkpoint.Options, error) {
	if c == nil {
		return checkpoint.Options{}, nil
	}
	if c.opt != nil {
		return *c.opt, nil
	}
	if c.maxBytes <= 0 {
		return checkpoint.Options{}, fmt.Errorf("%w: flag --checkpoint-max-bytes %d: want a positive number of bytes", errUsage, c.maxBytes)
	}
	opt := checkpoint.Options{MaxBytes: c.maxBytes}
	if c.keyFile != "" {
		k, err := checkpoint.LoadKeys(c.keyFile)
		if err != nil {
			return checkpoint.Options{}, fmt.Errorf("flag --checkpoint-key-file: %w", err)
		}
		opt.Keys = k
	}
	c.opt = &opt
	return opt, nil
}

// openCheckpointStore opens the checkpoint store at location with opt,
// s3:// buckets included (bucket.OpenS3): every command opens its store
// here.
func openCheckpointStore(ctx context.Context, location string, opt checkpoint.Options) (*checkpoint.Store, error) {
	opt.Buckets = bucket.OpenS3
	return checkpoint.OpenStore(ctx, location, opt)
}
