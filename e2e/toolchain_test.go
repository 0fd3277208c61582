package e2e

import (
	"bufio"
	"debug/buildinfo"
	"go/version"
	"os"
	"runtime"
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
	// A build suffix ("go1.26.11 X:foo") is not part of the release.
	older := func(v string) bool {
		v, _, _ = strings.Cut(v, " ")
		return version.Compare(v, want) < 0
	}
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
