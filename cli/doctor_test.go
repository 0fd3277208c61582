package cli

import (
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint/s3test"
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

// TestDoctorProbesAnS3CheckpointStore: doctor writes, reads back and
// deletes a probe object in an s3:// store (versitygw), never printing
// the secret key; with the wrong secret the check fails and says how to
// give credentials.
func TestDoctorProbesAnS3CheckpointStore(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("DATABASE_URL", "postgres://dqn@127.0.0.1:1/meta?sslmode=disable&connect_timeout=2")
	out, errOut, _ := run(t, "doctor", "--checkpoint-store", srv.URL("probe"))
	all := out + errOut
	if !strings.Contains(all, "ok    checkpoint store") || !strings.Contains(all, "a probe object was written, read back") || strings.Contains(all, srv.Secret) {
		t.Errorf("doctor with a working S3 store:\n%s", all)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-"+srv.Secret[:4])
	out, errOut, _ = run(t, "doctor", "--checkpoint-store", srv.URL("probe"))
	all = out + errOut
	if !strings.Contains(all, "fail  checkpoint store") || !strings.Contains(all, "AWS_ACCESS_KEY_ID") || strings.Contains(all, srv.Secret) {
		t.Errorf("doctor with a wrong S3 secret:\n%s", all)
	}
}
