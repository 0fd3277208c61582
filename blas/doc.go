// Package blas runs the float32 matrix products of the CPU backend
// (trainer/cpu) on the fastest BLAS a machine has, chosen at run time:
//
//   - "openblas": OpenBLAS (Linux: Debian's libopenblas0, and the usual
//     sonames of other distributions; macOS: Homebrew's), opened with
//     purego, so that the dqnflow binary needs no cgo and starts on machines
//     without it;
//   - "accelerate": Apple's Accelerate framework (macOS);
//   - "gonum": gonum's pure-Go kernels, tiled over goroutines: present on
//     every platform, and the portable reference whose every output is the
//     float32 sum of its products in index order (see Gonum.Sgemm).
//
// "auto" takes the first of OpenBLAS (Linux) or Accelerate (macOS) that
// opens, and gonum otherwise; Describe of the result says which ran and why.
// Asking for a library by name that does not open is an error naming what
// was tried, never a silent fallback.
//
// # Determinism
//
// gonum is bit-identical everywhere, whatever the number of threads (see
// Gonum.Sgemm). An optimised BLAS is bit-identical from run to run on one
// machine with one library build and thread count: OpenBLAS's level-3
// threading splits the rows and columns of C among threads but never the
// inner dimension, so no output is a sum of partial sums whose order
// depends on timing (TestOpenBLASIsDeterministic checks repeats and thread
// counts). Its kernels use FMA and a blocking of the inner dimension chosen
// per CPU, so its results differ from gonum's in the last bits, and from
// one CPU type to another.
//
// OpenBLAS's thread count is a property of the process, not of a call:
// Open sets it (openblas_set_num_threads) and Threads reads it back.
package blas
