package kernels

import (
	"embed"
	"fmt"
	"strings"
)

// kernelFS holds the CUDA C sources of every kernel. They include no toolkit
// header (DESIGN.md §5): bf16 is an unsigned short with our own conversions.
//
//go:embed *.cu
var kernelFS embed.FS

// kernelFiles is the order in which the sources are concatenated into one
// NVRTC program: common.cu first (types and helpers), then one file per job.
var kernelFiles = []string{"common.cu", "gemm.cu", "head.cu", "optim.cu", "replay.cu", "env.cu"}

// Names lists every kernel the trainer launches; loading the module
// resolves each once (device pointers and functions are resolved once, never
// per step).
var Names = []string{
	"gemm64", "gemm128o", "gemm128x64o", "head_infer", "c51_loss", "grad_reduce", "grad_norm", "adamw", "adamw_refresh",
	"spectral", "refresh", "ema", "cast_rows", "sample", "tree_sub", "tree_top", "prio_claim", "prio_set",
	"round_check",
	"env_reset", "env_observe", "env_step", "env_commit_scan", "env_commit", "bt_run", "bt_run_cluster",
}

// WGMMANames are the GEMMs on Hopper's warpgroup MMA
// (kernels/gemm.cu gemmWgmma), compiled into a bf16 or 3xTF32 fp32 module
// only for sm_90a (gpu/device/module.go useWGMMA): the forward's, and the
// backward's input gradients' with the mask epilogue (the "m" kernels,
// ADR 0023).
var WGMMANames = []string{"wgmma128", "wgmma128x64", "wgmma128m", "wgmma128x64m"}

// Source returns the program text of every kernel.
func Source() (string, error) {
	var b strings.Builder
	for _, f := range kernelFiles {
		src, err := kernelFS.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("kernel source %s: %w", f, err)
		}
		fmt.Fprintf(&b, "// ---- %s ----\n", f)
		b.Write(src)
		b.WriteByte('\n')
	}
	return b.String(), nil
}
