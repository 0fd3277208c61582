package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dqnflow/dqnflow/worker/workertest"
)

// envBinary names the dqnflow binary under test; `make test` sets it.
const envBinary = "DQNFLOW_BIN"

// built is the dqnflow binary built for this test process when envBinary
// is unset: once, into a directory TestMain removes.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// dqnflowBinary returns $DQNFLOW_BIN, or a static binary built from this
// module (CGO_ENABLED=0, as `make build` does).
func dqnflowBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envBinary); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			t.Fatalf("%s=%s is not a file (run `make build`, or unset it to build the binary here): %v", envBinary, p, err)
		}
		return p
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "dqnflow-e2e-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "dqnflow")
		cmd := exec.Command("go", "build", "-o", built.path, "github.com/dqnflow/dqnflow/cmd/dqnflow")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = &buildError{err: err, out: string(out)}
		}
	})
	if built.err != nil {
		t.Fatalf("build dqnflow (or set %s): %v", envBinary, built.err)
	}
	return built.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// temporalBinary returns the pinned Temporal CLI. Its absence fails the
// test: these tests are the only check that a run survives a dead worker.
func temporalBinary(t *testing.T) string {
	t.Helper()
	p := workertest.Binary()
	if p == "" {
		t.Fatalf("no Temporal CLI at bin/temporal: run `make temporal` (or set %s to the binary)", workertest.EnvBinary)
	}
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		t.Fatalf("Temporal CLI %s is not a file: run `make temporal` (or fix %s): %v", p, workertest.EnvBinary, err)
	}
	return p
}
