package workflows

import (
	"os/exec"
	"strings"
	"testing"
)

// linkedDrivers are the import path prefixes of packages that do I/O on
// their own and have no place in a deterministic workflow package: the
// metadata store and its database drivers and migrator, and the cloud SDK
// of the s3:// checkpoint stores.
var linkedDrivers = []string{
	"github.com/dqnflow/dqnflow/store",
	"github.com/dqnflow/dqnflow/checkpoint/bucket",
	"github.com/jackc/",
	"github.com/pressly/goose",
	"modernc.org/sqlite",
	"modernc.org/libc",
	"github.com/aws/",
	"gocloud.dev/blob/s3blob",
	"gocloud.dev/aws",
}

// TestWorkflowsLinkNoStoreOrCloudSDK lists every package this one links
// (go list -deps, the go command CI builds with) and fails on any of
// linkedDrivers, naming, for the first package of each, the chain of imports that brought it in.
func TestWorkflowsLinkNoStoreOrCloudSDK(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v; this test lists the package's dependencies with it", err)
	}
	out, err := exec.Command(goCmd, "list", "-deps", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", ".").Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, msg)
	}
	importedBy := map[string]string{} // a package -> one package that imports it
	var deps []string
	for line := range strings.Lines(string(out)) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), ":")
		deps = append(deps, pkg)
		for _, imp := range strings.Fields(imports) {
			if _, ok := importedBy[imp]; !ok {
				importedBy[imp] = pkg
			}
		}
	}
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages, want the whole closure:\n%s", len(deps), out)
	}
	reported := map[string]bool{} // one error a prefix: its first package
	for _, pkg := range deps {
		for _, bad := range linkedDrivers {
			if strings.HasPrefix(pkg, bad) && !reported[bad] {
				reported[bad] = true
				chain := []string{pkg}
				for p := importedBy[pkg]; p != "" && len(chain) < 64; p = importedBy[p] {
					chain = append(chain, p)
				}
				t.Errorf("workflows links %s (%s): import chain %s", pkg, bad, strings.Join(chain, " <- "))
				break
			}
		}
	}
}
