package gpu

import (
	"embed"
	"fmt"
	"strings"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
)

// kernelFS holds the CUDA C sources of every kernel. They include no toolkit
// header (DESIGN.md §5): bf16 is an unsigned short with our own conversions.
//
//go:embed kernels/*.cu
var kernelFS embed.FS

// kernelFiles is the order in which the sources are concatenated into one
// NVRTC program: common.cu first (types and helpers), then one file per job.
var kernelFiles = []string{"common.cu", "gemm.cu", "head.cu", "optim.cu", "replay.cu", "env.cu"}

// kernelNames lists every kernel the trainer launches; loading the module
// resolves each once (device pointers and functions are resolved once, never
// per step).
var kernelNames = []string{
	"gemm64", "gemm128o", "gemm128x64o", "head_infer", "c51_loss", "grad_reduce", "grad_norm", "adamw", "adamw_refresh",
	"spectral", "refresh", "ema", "cast_rows", "sample", "tree_sub", "tree_top", "prio_claim", "prio_set",
	"round_check",
	"env_reset", "env_observe", "env_step", "env_commit_scan", "env_commit", "bt_run", "bt_run_cluster",
}

// wgmmaKernelNames are the GEMMs on Hopper's warpgroup MMA
// (kernels/gemm.cu gemmWgmma), compiled into a bf16 or 3xTF32 fp32 module
// only for sm_90a (gpu/module.go useWGMMA): the forward's, and the
// backward's input gradients' with the mask epilogue (the "m" kernels,
// ADR 0023).
var wgmmaKernelNames = []string{"wgmma128", "wgmma128x64", "wgmma128m", "wgmma128x64m"}

// kernelSource returns the program text of every kernel.
func kernelSource() (string, error) {
	var b strings.Builder
	for _, f := range kernelFiles {
		src, err := kernelFS.ReadFile("kernels/" + f)
		if err != nil {
			return "", fmt.Errorf("kernel source %s: %w", f, err)
		}
		fmt.Fprintf(&b, "// ---- %s ----\n", f)
		b.Write(src)
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// kernelOptions are the NVRTC options of the module for model m in the given
// storage mode, with or without the wgmma GEMMs (for sm_90a, which this then compiles for), and
// in fp32 with the GEMMs' products as 3xTF32 on the tensor cores (tf32x3,
// kernels/gemm.cu gemmTf32) or fmaf on the CUDA cores: the sizes the kernels
// fix at compile time, and --fmad=false
// so that no product and sum are contracted into one rounding behind the
// reference's back (the float32 GEMM uses fmaf explicitly; its products
// are exact in float32 only up to that rounding, which the cross-backend
// tolerances state).
func kernelOptions(m config.ModelConfig, bf16, wgmma, tf32x3 bool) []string {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	mode := flag(bf16)
	cols, width := headCols(m.Atoms)
	var arch []string
	if wgmma {
		arch = []string{"--gpu-architecture=sm_90a"}
	}
	return append(arch, []string{
		"-DDQN_BF16=" + mode,
		fmt.Sprintf("-DOUTW=%d", width),
		fmt.Sprintf("-DCOLA0=%d", cols[1]),
		fmt.Sprintf("-DCOLA1=%d", cols[2]),
		fmt.Sprintf("-DCOLA2=%d", cols[3]),
		fmt.Sprintf("-DLOSS_SPB=%d", lossSamplesPerBlock),
		fmt.Sprintf("-DRUN_COLS=%d", reduceRunCols),
		fmt.Sprintf("-DTREE_SPAN=%d", treeSpan),
		fmt.Sprintf("-DOBS=%d", market.ObsDim),
		fmt.Sprintf("-DNFEAT=%d", market.NumFeatures),
		fmt.Sprintf("-DNAGENT=%d", market.NumAgentFeatures),
		fmt.Sprintf("-DATOMS=%d", m.Atoms),
		fmt.Sprintf("-DT1=%d", m.Trunk1),
		fmt.Sprintf("-DT2=%d", m.Trunk2),
		fmt.Sprintf("-DHD=%d", m.Head),
		"-DDQN_WGMMA=" + flag(wgmma),
		"-DDQN_TF32X3=" + flag(tf32x3 && !bf16),
		"--fmad=false",
		"--std=c++17",
	}...)
}
