package testproc

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestListensTellsWhichProcessHoldsAPort(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if !Listens(os.Getpid(), port) {
		t.Errorf("this process listens on %d, but Listens says it does not", port)
	}
	if other := FreePort(t); Listens(os.Getpid(), other) {
		t.Errorf("nothing listens on %d, but Listens says this process does", other)
	}
	if Listens(1<<30, port) {
		t.Error("a process that does not exist listens, says Listens")
	}
}

func TestStartOnFreePortsStartsAgainAServerThatExitsAtStart(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "server.log")
	var attempts []int
	cmd := func(ports []int, attempt int) *exec.Cmd {
		attempts = append(attempts, attempt)
		if len(ports) != 2 || ports[0] == ports[1] {
			t.Errorf("attempt %d: ports %v, want two different ones", attempt, ports)
		}
		if attempt < 3 {
			return exec.Command("sh", "-c", "echo port taken; exit 3")
		}
		return exec.Command("sleep", "30")
	}
	ready := func(p *Proc, _ []int) error {
		select {
		case <-p.Exited:
			return errors.New("exited at start")
		case <-time.After(200 * time.Millisecond):
			return nil
		}
	}
	p, _ := StartOnFreePorts(t, "fake", logPath, 2, cmd, ready)
	if !p.Alive() || len(attempts) != 3 {
		t.Fatalf("after attempts %v the server is alive: %v; want the third attempt running", attempts, p.Alive())
	}
	out, err := os.ReadFile(logPath + ".2")
	if err != nil || !strings.Contains(string(out), "port taken") {
		t.Errorf("the second attempt's output: %q, %v; want it in %s.2", out, err, logPath)
	}
}
