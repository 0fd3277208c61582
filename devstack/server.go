// Package devstack runs the processes of "dqnflow dev" beside the
// worker: it finds the pinned Temporal CLI, starts its dev server in a
// process group of its own and stops it, and holds the demo run's
// config.
package devstack

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/worker"
)

// Server is the Temporal dev server process that "dqnflow dev" runs.
type Server struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been waited for
}

// FindTemporal locates the Temporal CLI: flagValue, envValue (the value
// of the variable envName), temporal beside this executable,
// bin/temporal, then PATH.
func FindTemporal(flagValue, envValue, envName string) (string, error) {
	cands := []string{flagValue, envValue}
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(exe), "temporal"))
	}
	cands = append(cands, filepath.Join("bin", "temporal"))
	for _, p := range cands {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no Temporal CLI found: run \"make temporal\" (builds bin/temporal, the pinned v1.5.1) or set %s", envName)
}

// StartServer starts "temporal server start-dev" in its own process group
// with worker.DevServerFlags (search attributes and latency settings).
func StartServer(stderr io.Writer, bin string, port, uiPort int, dbFile string) (*Server, error) {
	args := []string{"server", "start-dev",
		"--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--ui-port", strconv.Itoa(uiPort),
		"--db-filename", dbFile, "--log-level", "error"}
	args = append(args, worker.DevServerFlags()...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = serverProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &Server{cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.exited) }()
	fmt.Fprintf(stderr, "dev: started Temporal dev server (pid %d, data %s)\n", cmd.Process.Pid, dbFile)
	return p, nil
}

// Alive returns an error once the server process has exited.
func (p *Server) Alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v (see its output above)", filepath.Base(p.cmd.Path), p.cmd.ProcessState)
	default:
		return nil
	}
}

// Stop ends the server's process group: SIGTERM, then SIGKILL after 10 s.
func (p *Server) Stop() {
	terminateGroup(p.cmd.Process)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		killGroup(p.cmd.Process)
		<-p.exited
	}
}

// DemoConfig is the small run that "dqnflow dev --demo" shows: the default
// model on the bundled S&P 500 data, a few short epochs.
func DemoConfig() config.RunConfig {
	cfg := config.Defaults()
	cfg.Epochs = 3
	cfg.StepsPerEpoch = 100
	return cfg
}
