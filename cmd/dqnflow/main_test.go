package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envChild makes the test binary run main with the arguments in
// envChildArgs (space-separated), as the dqnflow binary would.
const (
	envChild     = "DQNFLOW_MAIN_CHILD"
	envChildArgs = "DQNFLOW_MAIN_ARGS"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Args = append([]string{"dqnflow"}, strings.Fields(os.Getenv(envChildArgs))...)
		main()
	}
	os.Exit(m.Run())
}

// TestSIGTERMStopsADataRead sends SIGTERM to `dqnflow train` while it
// reads a 200 MB price file (10 million bars; seconds of reading, its last
// line bad) and checks that the process exits within a second, saying the
// read stopped at a line because it was cancelled: main's signal context
// reaches the parse. Before (issue 43) SIGTERM was caught and ignored
// until the read ended (54 s for the file).
func TestSIGTERMStopsADataRead(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 200 MB file")
	}
	path := filepath.Join(t.TempDir(), "big.csv")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("unix,open,high,low,close\n")
	for i := range 10_000_000 {
		w.WriteString(strconv.Itoa(1_000_000_000+60*i) + ",1.5,2,1,1.5\n")
	}
	w.WriteString("not a bar\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", envChildArgs+"=train --device cpu --blas gonum --out "+t.TempDir()+" --data-limits bars=20000000 --data "+path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var out strings.Builder
	lines := bufio.NewScanner(stderr)
	for lines.Scan() { // "device: ..." comes right before the data is read
		out.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "device: ") {
			break
		}
	}
	time.Sleep(300 * time.Millisecond) // well inside the read
	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
	}
	err = cmd.Wait()
	took := time.Since(signalled)
	t.Logf("exited %v after SIGTERM: %v\n%s", took, err, out.String())
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("exit: %v, want status 1", err)
	}
	if !strings.Contains(out.String(), "stopped at line") || !strings.Contains(out.String(), "context canceled") {
		t.Errorf("the output does not say the read was stopped by the signal:\n%s", out.String())
	}
	if took > time.Second {
		t.Errorf("exited %v after SIGTERM, want within 1 s", took)
	}
}
