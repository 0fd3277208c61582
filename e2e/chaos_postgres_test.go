//go:build chaos

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/trainer/faults"
	"github.com/dqnflow/dqnflow/worker/workertest"
)

// privatePostgres is a PostgreSQL cluster of the test's own, so that it
// can be stopped and started without disturbing the server other tests
// share. It needs the server binaries (Debian's postgresql package) and,
// when the test runs as root, the postgres user to run them as.
type privatePostgres struct {
	t        *testing.T
	bin, dir string
	port     int
	asUser   []string // runuser prefix when running as root
}

func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		t.Skip("no PostgreSQL server binaries under /usr/lib/postgresql (install the postgresql package)")
	}
	p := &privatePostgres{t: t, bin: filepath.Dir(bins[len(bins)-1])}
	base, err := os.MkdirTemp("", "dqnflow-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	p.dir = filepath.Join(base, "data")
	if os.Geteuid() == 0 {
		p.asUser = []string{"runuser", "-u", "postgres", "--"}
		if err := os.Mkdir(p.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("chown", "postgres:", base, p.dir).CombinedOutput(); err != nil {
			t.Fatalf("chown %s: %v\n%s", p.dir, err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	p.run("initdb", "-D", p.dir, "-A", "trust", "-U", "postgres", "--no-sync")
	p.start()
	t.Cleanup(func() { p.ctl("stop", "-m", "immediate") })
	return p
}

func (p *privatePostgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

func (p *privatePostgres) run(name string, args ...string) {
	p.t.Helper()
	argv := append(append(p.asUser, filepath.Join(p.bin, name)), args...)
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		p.t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

func (p *privatePostgres) ctl(args ...string) error {
	argv := append(append(p.asUser, filepath.Join(p.bin, "pg_ctl"), "-D", p.dir), args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return nil
}

func (p *privatePostgres) start() {
	p.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", p.port, filepath.Dir(p.dir))
	if err := p.ctl("-o", opts, "-l", filepath.Join(filepath.Dir(p.dir), "server.log"), "-w", "start"); err != nil {
		p.t.Fatal(err)
	}
}

// crash stops the server as a crash would (no shutdown checkpoint).
func (p *privatePostgres) crash() {
	p.t.Helper()
	if err := p.ctl("stop", "-m", "immediate"); err != nil {
		p.t.Fatal(err)
	}
}

// outage is how long the database stays down mid-run.
const outage = 8 * time.Second

// TestRunSurvivesPostgreSQLRestart crashes the metadata store's PostgreSQL
// server in the middle of a run, keeps it down for 8 s, starts it again,
// and checks that the run completes, bit-identical to an uninterrupted
// run, with every epoch, checkpoint and backtest recorded exactly once.
func TestRunSurvivesPostgreSQLRestart(t *testing.T) {
	pg := startPrivatePostgres(t)
	s := &stack{t: t, dir: t.TempDir(), bin: dqnflowBinary(t), dbURL: pg.url()}
	s.addr, s.client = workertest.DevServerAt(t, filepath.Join(s.dir, "temporal.log"))
	// Epochs of at least a second, so that the outage spans several.
	w := s.startWorkerEnv("worker", []string{faults.EnvPlan + "=delay:train=1s"})
	runID, cfg := startFaultRun(t, s, "e2e-pg")
	waitFor(t, "epoch 2 to train", 3*time.Minute, 50*time.Millisecond, func() (bool, error) {
		if err := w.alive(); err != nil {
			return false, err
		}
		acts, err := s.pending(context.Background(), runID)
		for _, pa := range acts {
			if pa.in("train") && pa.Started && pa.Heartbeat != nil && pa.Heartbeat.Epoch >= 2 {
				return true, nil
			}
		}
		return false, err
	})
	pg.crash()
	t.Logf("PostgreSQL crashed during epoch 2; down for %s", outage)
	time.Sleep(outage) // the fault itself: the database stays down this long
	pg.start()
	res := s.waitClosed(runID, 5*time.Minute, w)
	if res.Status != store.StatusCompleted || res.Epochs != cfg.Epochs {
		t.Fatalf("run result: %s, %d epochs; want completed, %d", res.Status, res.Epochs, cfg.Epochs)
	}
	rows := checkCheckpointRows(t, s, runID, cfg)
	compareWithUninterrupted(t, s, cfg, rows)

	checkRowsOncePerEpoch(t, s.dbURL, runID, cfg)
}

// checkRowsOncePerEpoch checks that the epochs, checkpoints and backtests
// tables of the database at dbURL hold one row of run id for each epoch
// 1..cfg.Epochs and no other.
func checkRowsOncePerEpoch(t *testing.T, dbURL, runID string, cfg config.RunConfig) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var want []string
	for e := 1; e <= cfg.Epochs; e++ {
		want = append(want, strconv.Itoa(e)+"×1")
	}
	for _, table := range []string{"epochs", "checkpoints", "backtests"} {
		rs, err := conn.Query(context.Background(), `SELECT epoch, count(*) FROM `+table+` WHERE run_id = $1 GROUP BY epoch ORDER BY epoch`, runID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rs.Next() {
			var e, n int
			if err := rs.Scan(&e, &n); err != nil {
				t.Fatal(err)
			}
			got = append(got, strconv.Itoa(e)+"×"+strconv.Itoa(n))
		}
		rs.Close()
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s rows of run %s per epoch: %v, want each of 1..%d once", table, runID, got, cfg.Epochs)
		}
	}
}
