// Package kernels owns the CUDA C sources of every kernel of the backend
// (the .cu files beside this one, embedded: DESIGN.md §5) and what Go must
// know of them: the order in which they form one NVRTC program (Source),
// the kernels a module resolves (Names, WGMMANames), and the tile shapes
// of the GEMM kernels with their dynamic shared memory (GEMMShapes,
// WGMMAShapes). The model sizes and options a module is compiled with are
// the step's (gpu/step).
package kernels
