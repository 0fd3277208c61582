package policy

import (
	"fmt"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// Export returns the network of the greedy policy saved in ck (a training
// checkpoint, or an exported f32 or bf16 file) as the inference file that
// `dqnflow checkpoint export` writes: every parameter block of the model
// in ck's config, named without the "online." prefix, in dtype (F32, BF16
// or F16; checkpoint.Export converts and counts). It refuses, returning no
// checkpoint, when ck lacks a block or holds one of another shape
// (checkpoint.ErrMissingTensor, ErrTensorMismatch), when a weight is NaN
// or infinite (checkpoint.ErrNotFinite) and when a weight would overflow
// dtype (checkpoint.ErrOverflow); each error names the tensor, and the
// last two the first bad element. What it returns holds exactly the
// blocks of the model in its config's metadata, so it passes
// trainer.CheckComplete (TestExportedFilesLoad).
func Export(ck *checkpoint.Checkpoint, dtype checkpoint.DType) (*checkpoint.Checkpoint, checkpoint.ExportReport, error) {
	cfg, err := trainer.CheckpointConfig(ck)
	if err != nil {
		return nil, checkpoint.ExportReport{}, fmt.Errorf("export: %w", err)
	}
	prefix := model.PrefixOnline
	if _, exported := ck.Meta[checkpoint.MetaDType]; exported {
		prefix = ""
	}
	return checkpoint.Export(ck, dtype, prefix, model.ParamSpecs(cfg.Model, prefix, checkpoint.F32, checkpoint.BF16))
}
