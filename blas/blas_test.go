package blas

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// available returns the implementations to test. With DQNFLOW_REQUIRE_OPENBLAS=1
// (CI installs OpenBLAS) a missing OpenBLAS fails the test instead of
// leaving it out.
func available(t *testing.T, threads int) []BLAS {
	t.Helper()
	bs := Available(threads)
	if os.Getenv("DQNFLOW_REQUIRE_OPENBLAS") == "1" && runtime.GOOS == "linux" {
		if _, err := Open(NameOpenBLAS, threads); err != nil {
			t.Fatalf("DQNFLOW_REQUIRE_OPENBLAS=1: %v", err)
		}
	}
	for _, b := range bs {
		t.Logf("testing %s", b.Describe())
	}
	return bs
}

// TestSgemmMatchesFloat64 checks every available BLAS against a float64
// product for all four transpositions, β = 0 and 1, strides larger than
// the rows, and shapes from 1×1×1 to a few hundred (the training step's
// are 512×512×256 and smaller). The tolerance is float32 accumulation
// error, 1e-5 of Σ|products|; a transposition or stride mix-up is off by
// O(1).
func TestSgemmMatchesFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, b := range available(t, 2) {
		for _, sh := range []struct{ m, n, k int }{{1, 1, 1}, {7, 3, 5}, {130, 400, 70}, {256, 512, 256}, {3, 204, 128}} {
			for _, tA := range []bool{false, true} {
				for _, tB := range []bool{false, true} {
					for _, beta := range []float32{0, 1} {
						name := fmt.Sprintf("%s %dx%dx%d tA=%v tB=%v beta=%g", b.Name(), sh.m, sh.n, sh.k, tA, tB, beta)
						ar, ac := sh.m, sh.k
						if tA {
							ar, ac = sh.k, sh.m
						}
						br, bc := sh.k, sh.n
						if tB {
							br, bc = sh.n, sh.k
						}
						lda, ldb, ldc := ac+3, bc+1, sh.n+2
						a, bm := randMatrix(r, ar, lda), randMatrix(r, br, ldb)
						c := randMatrix(r, sh.m, ldc)
						if beta == 0 {
							c[0] = float32(math.NaN()) // must not be read
						}
						c0 := slices.Clone(c)
						b.Sgemm(tA, tB, sh.m, sh.n, sh.k, a, lda, bm, ldb, beta, c, ldc)
						for i := 0; i < sh.m; i++ {
							for j := 0; j < ldc; j++ {
								got := c[i*ldc+j]
								if j >= sh.n {
									if math.Float32bits(got) != math.Float32bits(c0[i*ldc+j]) {
										t.Fatalf("%s: C[%d,%d] outside the product changed", name, i, j)
									}
									continue
								}
								var want, abs float64
								if beta == 1 {
									want, abs = float64(c0[i*ldc+j]), math.Abs(float64(c0[i*ldc+j]))
								}
								for l := 0; l < sh.k; l++ {
									var x, y float32
									if tA {
										x = a[l*lda+i]
									} else {
										x = a[i*lda+l]
									}
									if tB {
										y = bm[j*ldb+l]
									} else {
										y = bm[l*ldb+j]
									}
									p := float64(x) * float64(y)
									want += p
									abs += math.Abs(p)
								}
								if d := math.Abs(float64(got) - want); !(d <= 1e-5*abs+1e-30) {
									t.Fatalf("%s: C[%d,%d] = %g, float64 %g (|Δ| %.3g, Σ|p| %.3g)", name, i, j, got, want, d, abs)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestSgemmIsDeterministic checks that every available BLAS gives the same
// bits for the same product repeated, at one and at two threads, on the
// training step's largest shape. It also reports (not requires) whether
// the thread count changes the bits.
func TestSgemmIsDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const m, n, k = 512, 512, 256
	a, bm := randMatrix(r, m, k), randMatrix(r, n, k)
	for _, b := range available(t, 2) {
		var first []float32
		for _, threads := range []int{2, 1} {
			b = b.WithThreads(threads)
			var ref []float32
			for rep := 0; rep < 5; rep++ {
				c := make([]float32, m*n)
				b.Sgemm(false, true, m, n, k, a, k, bm, k, 0, c, n)
				if ref == nil {
					ref = c
					continue
				}
				for i := range c {
					if math.Float32bits(c[i]) != math.Float32bits(ref[i]) {
						t.Fatalf("%s, %d threads: repeat %d differs at %d: %g vs %g", b.Name(), threads, rep, i, c[i], ref[i])
					}
				}
			}
			if first == nil {
				first = ref
			} else if !slices.Equal(first, ref) {
				t.Logf("%s: 1 and 2 threads give different bits", b.Name())
			}
		}
		b.WithThreads(2)
	}
}

// TestOpenNamesWhatIsMissing checks that an optimised BLAS asked for by
// name and not found is an error that names the paths tried and how to
// install it, and that "auto" then says it chose gonum and why.
func TestOpenNamesWhatIsMissing(t *testing.T) {
	t.Setenv("DQNFLOW_OPENBLAS", "/nonexistent/libopenblas.so.0")
	// Open caches the first load of the process; test the loader directly.
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no run-time loading on " + runtime.GOOS)
	}
	_, err := openBLASLibOpen()
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound", err)
	}
	for _, want := range []string{"/nonexistent/libopenblas.so.0", "DQNFLOW_OPENBLAS=", "apt-get install libopenblas0", "--blas gonum"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := Open("mkl", 1); err == nil || !strings.Contains(err.Error(), `"mkl"`) {
		t.Errorf(`Open("mkl"): error %v, want one naming the value`, err)
	}
	g := Gonum{Workers: 1, Why: "auto chose gonum because openblas did not open: x"}
	if !strings.Contains(g.Describe(), "auto chose gonum because") {
		t.Errorf("Describe %q hides why gonum runs", g.Describe())
	}
}

// TestSgemmIsSafeForConcurrentUse runs products on every available BLAS
// from four goroutines at once (a worker trains several runs in one
// process) and checks each against the same product run alone.
func TestSgemmIsSafeForConcurrentUse(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	const m, n, k, g = 300, 260, 200, 4
	var as, bs, want [g][]float32
	for _, b := range available(t, 2) {
		for i := range g {
			as[i], bs[i] = randMatrix(r, m, k), randMatrix(r, k, n)
			want[i] = make([]float32, m*n)
			b.Sgemm(false, false, m, n, k, as[i], k, bs[i], n, 0, want[i], n)
		}
		errs := make(chan string, g)
		for i := range g {
			go func() {
				c := make([]float32, m*n)
				for rep := 0; rep < 20; rep++ {
					b.Sgemm(false, false, m, n, k, as[i], k, bs[i], n, 0, c, n)
					if !slices.Equal(c, want[i]) {
						errs <- fmt.Sprintf("%s: goroutine %d repeat %d differs from the product run alone", b.Name(), i, rep)
						return
					}
				}
				errs <- ""
			}()
		}
		for range g {
			if e := <-errs; e != "" {
				t.Error(e)
			}
		}
	}
}

// TestOpenBLASSaysWhoChoseItsKernels: the kernels OpenBLAS runs are named
// with who chose them, OpenBLAS's own CPU detection or OPENBLAS_CORETYPE,
// and dqnflow leaves the variable as it was.
func TestOpenBLASSaysWhoChoseItsKernels(t *testing.T) {
	userSet := os.Getenv(coreTypeVar)
	b, err := Open(NameOpenBLAS, 1)
	if err != nil {
		t.Skipf("OpenBLAS does not open here: %v", err)
	}
	d := b.Describe()
	if userSet != "" {
		if !strings.Contains(d, coreTypeVar+"="+userSet) {
			t.Errorf("Describe %q does not say %s=%s", d, coreTypeVar, userSet)
		}
	} else if !strings.Contains(d, "kernels: detected by OpenBLAS;") {
		t.Errorf("Describe %q does not say OpenBLAS detected its kernels", d)
	}
	if got := os.Getenv(coreTypeVar); got != userSet {
		t.Errorf("%s is %q after Open, was %q", coreTypeVar, got, userSet)
	}
	t.Log(d)
}

// TestOpenBLASIdleThreadsSleep: unless the user set OPENBLAS_THREAD_TIMEOUT,
// OpenBLAS loads with its idle workers sleeping after 2^4 cycles, Describe
// says what OpenBLAS read, and the variable is left as it was.
func TestOpenBLASIdleThreadsSleep(t *testing.T) {
	userSet := os.Getenv(threadTimeoutVar)
	b, err := Open(NameOpenBLAS, 1)
	if err != nil {
		t.Skipf("OpenBLAS does not open here: %v", err)
	}
	want := "idle threads sleep after 2^" + threadTimeoutDefault + " cycles"
	if userSet != "" {
		want = "idle threads sleep after 2^" + userSet + " cycles"
	}
	if d := b.Describe(); !strings.Contains(d, want) {
		t.Errorf("Describe %q does not say %q", d, want)
	}
	if got := os.Getenv(threadTimeoutVar); got != userSet {
		t.Errorf("%s is %q after Open, was %q", threadTimeoutVar, got, userSet)
	}
}
