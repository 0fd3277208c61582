package gpu

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// envReaders are the only places in the gpu packages' code (tests aside)
// that may read the environment, by file and function:
//   - gpu/device/tuning.go TuningFromEnv, the one reader of the backend's tuning;
//   - gpu/cuda/library.go libSpec.open, which reads where the driver and
//     NVRTC libraries are (DQNFLOW_LIBCUDA, DQNFLOW_NVRTC) before there
//     is a device to tune: a path on this machine, like LD_LIBRARY_PATH,
//     never a setting of what the device computes;
//   - gpu/internal/gputest/gputest.go SkipWithoutGPU, which reads
//     DQNFLOW_REQUIRE_GPU (a skip becomes a failure on a device visit):
//     a package only the tests import.
var envReaders = map[string]string{"device/tuning.go": "TuningFromEnv", "cuda/library.go": "open", "internal/gputest/gputest.go": "SkipWithoutGPU"}

// TestOnlyTuningFromEnvReadsTheEnvironment parses every non-test Go file
// of gpu and the packages under it and fails on any use of os.Getenv,
// os.LookupEnv or os.Environ outside envReaders: a knob read anywhere
// else would change what a run computes without being in its Tuning, and
// so without being in its record.
func TestOnlyTuningFromEnvReadsTheEnvironment(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		files++
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		os := "os" // the name the file imports package os under
		for _, im := range f.Imports {
			if im.Path.Value == `"os"` && im.Name != nil {
				os = im.Name.Name
			}
		}
		for _, decl := range f.Decls {
			fn := ""
			if fd, ok := decl.(*ast.FuncDecl); ok {
				fn = fd.Name.Name
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok || x.Name != os || (sel.Sel.Name != "Getenv" && sel.Sel.Name != "LookupEnv" && sel.Sel.Name != "Environ") {
					return true
				}
				if envReaders[filepath.ToSlash(path)] != fn || fn == "" {
					t.Errorf("%s: os.%s in %s: only TuningFromEnv reads the environment; add the knob to Tuning",
						fset.Position(sel.Pos()), sel.Sel.Name, map[bool]string{true: "a package-level declaration", false: fn}[fn == ""])
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("parsed %d files: the walk missed the package", files)
	}
}
