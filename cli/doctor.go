package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/doctor"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/temporalconn"
)

// doctorCmd is "dqnflow doctor [--json]": what is reachable and
// what is misconfigured (package doctor), without printing secrets.
func doctorCmd(e *env) *cobra.Command {
	cmd := leaf("doctor",
		"check what is reachable and what is misconfigured",
		"doctor checks Temporal (server, namespace, search attributes, workers), the metadata store, GPUs and the libraries the CUDA backend loads, the checkpoint store and the Temporal CLI, and says what to do about each that fails.",
		"dqnflow doctor",
		"TEMPORAL_ADDRESS=temporal:7233 dqnflow doctor --json")
	fs := cmd.Flags()
	e.conn.register(fs)
	jsonOut := fs.Bool("json", false, "print the checks as JSON")
	ckStore := fs.String("checkpoint-store", defaultCheckpointStore(), "checkpoint store to check, as a worker's --checkpoint-store (--checkpoint-dir is its older name)")
	fs.StringVar(ckStore, "checkpoint-dir", defaultCheckpointStore(), "the older name of --checkpoint-store")
	fs.MarkHidden("checkpoint-dir")
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		o := doctor.Options{Address: e.conn.address(), Namespace: e.conn.namespace(), CheckpointStore: *ckStore,
			OpenCheckpointStore: openCheckpointStore, FindTemporal: func() (string, error) { return findTemporal("") }}
		o.Client, o.ClientErr = clientOptions(e)
		o.Checkpoint, o.CheckpointErr = e.ckpt.options()
		o.Env.TemporalAddress, o.Env.TemporalNamespace = temporalconn.EnvAddress, temporalconn.EnvNamespace
		o.Env.CheckpointStore, o.Env.CheckpointKeyFile = envCheckpointStore, envCheckpointKeyFile
		checks := doctor.Run(ctx, o)
		failed := doctor.Failed(checks)
		if *jsonOut {
			if err := jsonfile.Print(e.stdout, map[string]any{"checks": checks, "failed": failed}); err != nil {
				return err
			}
		} else {
			doctor.Print(e.stdout, checks)
		}
		if failed > 0 {
			return fmt.Errorf("%d check(s) failed", failed)
		}
		return nil
	}
	return cmd
}
