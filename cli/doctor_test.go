package cli

import (
	"strings"
	"testing"
)

// TestDoctorNamesWhatFailsWithoutSecrets: with nothing reachable, doctor
// fails the Temporal and store checks with what to do, exits 1, and never
// prints the database password.
func TestDoctorNamesWhatFailsWithoutSecrets(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("DATABASE_URL", "postgres://dqn:s3cret-pw@127.0.0.1:1/meta?sslmode=disable&connect_timeout=2")
	out, errOut, code := run(t, "doctor", "--checkpoint-dir", t.TempDir())
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	all := out + errOut
	if strings.Contains(all, "s3cret") {
		t.Fatalf("doctor printed the database password:\n%s", all)
	}
	for _, want := range []string{"fail  temporal", "127.0.0.1:1", "dqnflow dev", "fail  metadata store", "PostgreSQL 127.0.0.1:1 database meta",
		"ok    checkpoint directory", "is writable"} {
		if !strings.Contains(all, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, all)
		}
	}
}
