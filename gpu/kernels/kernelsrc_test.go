package kernels

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// Programmatic dependent launch is only safe because every kernel waits for
// the one before it before doing anything else, in every block (ADR 0019):
// a kernel that returned before the wait could end before its predecessor
// and let the next kernel read half-written results.
func TestEveryKernelWaitsForItsPredecessorFirst(t *testing.T) {
	files, err := fs.Glob(kernelFS, "*.cu") // the embedded sources: the test binary runs anywhere
	if err != nil || len(files) == 0 {
		t.Fatalf("kernel sources: %v (%d files)", err, len(files))
	}
	entry := regexp.MustCompile(`extern "C" __global__[^{]*\{\s*([^\n]*)`)
	n := 0
	for _, f := range files {
		src, err := kernelFS.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range entry.FindAllSubmatch(src, -1) {
			n++
			if first := strings.TrimSpace(string(m[1])); first != "pdlEnter();" {
				name := regexp.MustCompile(`(\w+)\(`).FindSubmatch(m[0])
				t.Errorf("%s: kernel %s starts with %q, not pdlEnter();", f, name[1], first)
			}
		}
	}
	if n < 30 {
		t.Errorf("found %d kernels, expected every kernel of the module (more than 30)", n)
	}
}
