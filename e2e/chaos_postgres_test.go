//go:build chaos

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer/faults"
	"github.com/dqnflow/dqnflow/worker/workertest"
)

// envRequirePGServer, set to 1 (CI sets it: its machines have the
// server installed), makes missing PostgreSQL server binaries a failure
// of the tests that start a private cluster instead of a skip.
const envRequirePGServer = "DQNFLOW_REQUIRE_PGSERVER"

// privatePostgres is a PostgreSQL cluster of the test's own, so that it
// can be stopped and started without disturbing the server other tests
// share. It needs the server binaries (Debian's postgresql package, under
// /usr/lib/postgresql/VERSION/bin) and, when the test runs as root, the
// postgres user to run them as.
type privatePostgres struct {
	t        *testing.T
	bin, dir string
	port     int
	asUser   []string // runuser prefix when running as root
}

func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		if os.Getenv(envRequirePGServer) == "1" {
			t.Fatalf("%s=1: %v", envRequirePGServer, err)
		}
		t.Skip(err)
	}
	p := &privatePostgres{t: t, bin: bin}
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

// postgresBin returns the directory of the newest PostgreSQL server
// binaries installed in Debian's layout (initdb and pg_ctl in
// /usr/lib/postgresql/VERSION/bin).
func postgresBin() (string, error) {
	const pattern = "/usr/lib/postgresql/*/bin"
	dirs, _ := filepath.Glob(pattern)
	best, bestVersion := "", -1.0
	for _, d := range dirs {
		v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64) // "15", "9.6"
		if err != nil || v <= bestVersion {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err != nil {
			continue
		}
		best, bestVersion = d, v
	}
	if best == "" {
		return "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl) in %s: install the postgresql package", pattern)
	}
	return best, nil
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
	waitTraining(t, s, runID, w)
	logAtCrash := len(w.output())
	pg.crash()
	t.Logf("PostgreSQL crashed during epoch 2; down for %s", outage)
	time.Sleep(outage) // the fault itself: the database stays down this long
	// What the worker logged between the crash and the restart: the
	// store writes it attempted while the database was down.
	failed := failedStoreWrites(w.output()[logAtCrash:], runID)
	pg.start()
	if len(failed) == 0 {
		t.Fatalf("the worker logged no failed store write of run %s while PostgreSQL was down: the outage was not tested; its log since the crash:\n%s",
			runID, w.output()[logAtCrash:])
	}
	res := s.waitClosed(runID, 5*time.Minute, w)
	if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs {
		t.Fatalf("run result: %s, %d epochs; want completed, %d", res.Status, res.Epochs, cfg.Epochs)
	}
	rows := checkCheckpointRows(t, s, runID, cfg)
	n := compareWithUninterrupted(t, s, cfg, rows)
	// Each write that failed during the outage succeeded after it: its
	// row is there, once, with every other epoch's.
	checkRowsOncePerEpoch(t, s.dbURL, runID, cfg)
	for _, f := range failed {
		if f.epoch < 1 || f.epoch > cfg.Epochs {
			t.Errorf("a failed write of %s row of epoch %d, outside the run's 1..%d", f.table, f.epoch, cfg.Epochs)
		}
	}
	t.Logf("store writes that failed during the outage and were recorded after it: %v; %d checkpoints bit-identical (%d tensors)", failed, len(rows), n)
}

// storeWrite is a metadata store write: the table and the epoch.
type storeWrite struct {
	table string
	epoch int
}

func (w storeWrite) String() string { return fmt.Sprintf("%s of epoch %d", w.table, w.epoch) }

// failedWrite matches a failed store write of a run's epoch, as the
// store's errors name it ("record backtest RUN epoch N split valid: …",
// "record checkpoint RUN epoch N: …", "record epoch N of run RUN: …") in
// a worker's log line that reports an error.
var failedWrite = regexp.MustCompile(`record (?:(backtest|checkpoint) (\S+) epoch (\d+)|(epoch) (\d+) of run (\S+?):)`)

// failedStoreWrites returns the store writes of run runID that log
// reports as failed, each once.
func failedStoreWrites(log, runID string) []storeWrite {
	seen := map[storeWrite]bool{}
	var out []storeWrite
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "level=ERROR") && !strings.Contains(line, "level=WARN") {
			continue
		}
		for _, m := range failedWrite.FindAllStringSubmatch(line, -1) {
			table, run, num := m[1], m[2], m[3]
			if m[4] != "" {
				table, num, run = "epochs", m[5], m[6]
			} else {
				table += "s"
			}
			e, _ := strconv.Atoi(num)
			if w := (storeWrite{table, e}); run == runID && !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out
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
