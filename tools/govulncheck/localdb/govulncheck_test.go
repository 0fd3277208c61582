package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// govulncheck returns the govulncheck binary the tests run: $GOVULNCHECK
// (`make vulncheck` passes the one it checks with), or one built from this
// module's pin.
func govulncheck(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GOVULNCHECK"); p != "" {
		return p
	}
	if testing.Short() {
		t.Skip("builds govulncheck; set GOVULNCHECK to a built one, or run without -short")
	}
	p := filepath.Join(t.TempDir(), "govulncheck")
	out, err := exec.Command("go", "build", "-o", p, "golang.org/x/vuln/cmd/govulncheck").CombinedOutput()
	if err != nil {
		t.Fatalf("go build govulncheck: %v\n%s", err, out)
	}
	return p
}

// A vulnerability in every Go release's strings.Title, which no Go
// vulnerability has: only a program that calls it is affected.
const titleEntry = `{"schema_version":"1.3.1","id":"GO-2099-0001","modified":"0001-01-01T00:00:00Z",
"summary":"Test vulnerability in strings.Title",
"database_specific":{"url":"https://pkg.go.dev/vuln/GO-2099-0001"},
"affected":[{"package":{"name":"stdlib","ecosystem":"Go"},
"ranges":[{"type":"SEMVER","events":[{"introduced":"0"}]}],
"ecosystem_specific":{"imports":[{"path":"strings","symbols":["Title"]}]}}]}`

// vulncheckScript is the wrapper `make vulncheck` runs govulncheck with.
const vulncheckScript = "../vulncheck.sh"

// exitStatus runs cmd and returns its combined output and exit status.
func exitStatus(t *testing.T, cmd *exec.Cmd) (string, int) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// TestGovulncheckFailsOnlyOnACalledVulnerableSymbol runs the real
// govulncheck, as `make vulncheck` does, against a database Build wrote,
// over a program that calls the vulnerable symbol (exit status 3, the
// check fails) and one that only imports its package (exit status 0, the
// check passes).
func TestGovulncheckFailsOnlyOnACalledVulnerableSymbol(t *testing.T) {
	bin := govulncheck(t)
	tmp := t.TempDir()
	zipPath := writeModuleZip(t, tmp, testModVersion, map[string]string{
		"data/osv/GO-2099-0001.json": titleEntry,
		"data/osv/GO-2026-0002.json": twoModulesEntry,
	})
	db := filepath.Join(tmp, "db")
	if _, err := Build(zipPath, testModVersion, testDate, db); err != nil {
		t.Fatal(err)
	}

	mod := filepath.Join(tmp, "victim")
	for name, content := range map[string]string{
		"go.mod":          "module example.com/victim\n\ngo 1.26\n",
		"calls/main.go":   "package main\n\nimport \"strings\"\n\nfunc main() { println(strings.Title(\"x\")) }\n",
		"imports/main.go": "package main\n\nimport \"strings\"\n\nfunc main() { println(strings.ToLower(\"x\")) }\n",
	} {
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		pkg      string
		wantExit int
		want     []string
	}{
		{"./calls", 3, []string{"GO-2099-0001", "calls strings.Title", "Your code is affected by 1 vulnerability"}},
		{"./imports", 0, []string{"No vulnerabilities found", "1 vulnerability in packages you import"}},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			out, exit := exitStatus(t, exec.Command(vulncheckScript, bin, "file://"+filepath.ToSlash(db), "-C", mod, tc.pkg))
			if exit != tc.wantExit {
				t.Errorf("exit status %d, want %d", exit, tc.wantExit)
			}
			// The date govulncheck shows is the one Build gave the database.
			for _, want := range append(tc.want, "DB updated: 2026-11-05 23:49:57 +0000 UTC") {
				if !strings.Contains(out, want) {
					t.Errorf("output does not say %q", want)
				}
			}
			if t.Failed() {
				t.Logf("govulncheck %s:\n%s", tc.pkg, out)
			}
		})
	}
}

// TestVulncheckFailsWhenGovulncheckGivesNoVerdict: a govulncheck that exits
// 0 without saying "No vulnerabilities found." (a crash in its scanning
// goroutine can) fails the check.
func TestVulncheckFailsWhenGovulncheckGivesNoVerdict(t *testing.T) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true command:", err)
	}
	out, exit := exitStatus(t, exec.Command(vulncheckScript, truePath, "file:///nonexistent", "./..."))
	if exit != 1 || !strings.Contains(out, "without its verdict") {
		t.Errorf("exit status %d, output %q; want 1 and the reason", exit, out)
	}
}
