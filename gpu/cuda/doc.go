// Package cuda is dqnflow's binding to the NVIDIA CUDA driver API and to NVRTC,
// opened at run time with purego so that the dqnflow binary stays static
// (CGO_ENABLED=0) and starts on machines without a GPU (DESIGN.md §5, §6).
//
// Nothing is loaded in init(). The driver (libcuda.so.1) is opened by the first
// call to [Devices], [DriverVersion] or [Open]; NVRTC by [NewCompiler]. A missing
// library is an error wrapping [ErrNoDriver] or [ErrNoNVRTC] that lists the names
// and folders tried; the environment variables DQNFLOW_LIBCUDA and DQNFLOW_NVRTC
// name an exact file instead.
//
// CUDA contexts are per OS thread. A [Device] owns one goroutine locked to its OS
// thread with the device's primary context current; every CUDA call runs there,
// sent through [Device.Do]:
//
//	d, err := cuda.Open(0)
//	...
//	err = d.Do(func(c *cuda.Ctx) error {
//		p, err := c.Alloc(4 * len(xs))
//		if err != nil {
//			return err
//		}
//		return cuda.Upload(c, p, xs)
//	})
//
// A [Ctx] is only valid inside Do, on the device thread; its methods return an
// error when called anywhere else. Every non-zero status becomes an [*Error]
// naming the call, the status name and its description.
//
// Kernels take their arguments through [Ctx.Launch], which accepts DevPtr,
// int32, uint32, int64, uint64, float32 and float64 only: a plain int has no
// fixed C width and is refused rather than guessed.
package cuda
