package step

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"
	"github.com/dqnflow/dqnflow/gpu/kernels"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
)

// moduleFor compiles (or takes from the disk cache) and loads the kernels
// for model m in one storage mode, in the GEMM paths of s, on d. Call
// inside Do.
func moduleFor(c *cuda.Ctx, d *device.Device, m config.ModelConfig, bf16 bool, s device.Setup) (*device.Kernels, error) {
	tc := s.TC()
	wg := s.WGMMA.On && (bf16 || tc)
	if !bf16 && tc && d.Arch() < 80 {
		return nil, fmt.Errorf("fp32 on sm_%d: the fp32 GEMMs run as 3xTF32 on the tensor cores, which need sm_80 or newer; set gpu tuning fp32_gemm = simt (DQNFLOW_FP32_GEMM=simt) for fmaf on the CUDA cores", d.Arch())
	}
	shapes := kernels.GEMMShapes(bf16, tc)
	if wg {
		shapes = append(append(shapes, kernels.WGMMAShapes(bf16)...), kernels.WGMMAMaskShapes(bf16)...)
	}
	var shared []device.DynShared
	for _, sh := range shapes {
		if sh.Shared > 48<<10 {
			shared = append(shared, device.DynShared{Name: sh.Name, Bytes: sh.Shared})
		}
	}
	key := device.ModuleKey{BF16: bf16, TF32: !bf16 && tc, WGMMA: wg, Atoms: m.Atoms, T1: m.Trunk1, T2: m.Trunk2, Head: m.Head}
	return d.Load(c, key, s.CacheDir(), kernelOptions(m, bf16, wg, tc), shared)
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
