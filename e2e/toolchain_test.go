package e2e

import (
	"bufio"
	"debug/buildinfo"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// goModToolchain is the Go release go.mod's toolchain line names
// ("go1.26.11"), read from the module root.
func goModToolchain(t *testing.T) string {
	t.Helper()
	f, err := os.Open("../go.mod")
	if err != nil {
		t.Fatalf("open go.mod: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "toolchain "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("go.mod has no toolchain line")
	return ""
}

// TestBinaryIsBuiltWithTheToolchainGoModNames checks that the binary under
// test and this test binary were built by the Go release go.mod names (or a
// newer one), not by an older one installed on the machine: the standard
// library goes into every binary, and go1.26.8's carries vulnerabilities
// that go1.26.11 fixes (docs/reliability.md, Security). On a machine whose
// go.env says GOTOOLCHAIN=local, only the Makefile's GOTOOLCHAIN makes this
// hold for `make build`, `make run` and `make test`.
func TestBinaryIsBuiltWithTheToolchainGoModNames(t *testing.T) {
	want := goModToolchain(t)
	older := func(v string) bool { return goRelease(v) < goRelease(want) }
	if got := runtime.Version(); older(got) {
		t.Errorf("this test binary was built with %s, older than go.mod's toolchain %s: run it through make (GOTOOLCHAIN in the Makefile)", got, want)
	}
	bin := dqnflowBinary(t)
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("read build info of %s: %v", bin, err)
	}
	if older(info.GoVersion) {
		t.Errorf("%s was built with %s, older than go.mod's toolchain %s", bin, info.GoVersion, want)
	}
}

// goRelease orders Go release names: "go1.26.11" is 1_026_011; a
// pre-release or build suffix ("go1.27rc1", "go1.26.11 X:foo") counts as its
// release's .0.
func goRelease(v string) int {
	v, _, _ = strings.Cut(strings.TrimPrefix(v, "go"), " ")
	n := 0
	for i, part := range strings.SplitN(v, ".", 3) {
		digits := part
		if j := strings.IndexFunc(part, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
			digits = part[:j]
		}
		x, _ := strconv.Atoi(digits)
		n += x * []int{1_000_000, 1_000, 1}[i]
	}
	return n
}

func TestGoReleaseOrdersReleases(t *testing.T) {
	for _, c := range []struct {
		a, b string
		less bool
	}{
		{"go1.26.8", "go1.26.11", true},
		{"go1.26.11", "go1.26.11", false},
		{"go1.27rc1", "go1.26.11", false},
		{"go1.27.3", "go1.26.11", false},
		{"go1.25", "go1.26.0", true},
	} {
		if got := goRelease(c.a) < goRelease(c.b); got != c.less {
			t.Errorf("goRelease(%q) < goRelease(%q) = %v, want %v", c.a, c.b, got, c.less)
		}
	}
}
