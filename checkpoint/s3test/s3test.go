// Package s3test starts an S3-compatible server for tests that need a real
// one: versitygw (pinned in tools/versitygw, built into bin/versitygw by
// `make versitygw`, or $DQNFLOW_S3) with its posix backend serving a
// directory of the test, on a free local port, with a fresh bucket and
// random credentials.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dqnflow/dqnflow/internal/testproc"
)

// EnvBinary names the versitygw binary; `make test` sets it.
const EnvBinary = "DQNFLOW_S3"

// Region is the region the server answers for (versitygw's default).
const Region = "us-east-1"

// Server is a running versitygw with one empty bucket.
type Server struct {
	// Endpoint is the server's http://host:port.
	Endpoint string
	// Bucket is the bucket created for the test.
	Bucket string
	// Dir is the directory the posix backend serves: Dir/<bucket>/<key>
	// is an object's file, so a test can damage one.
	Dir string
	// AccessKey and Secret are the root user's credentials.
	AccessKey, Secret string
}

// URL is the checkpoint store URL of the bucket under prefix
// (checkpoint.OpenStore); it names the endpoint and never the credentials.
func (s *Server) URL(prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s&use_path_style=true", s.Bucket, prefix, s.Endpoint, Region)
}

// Env is the environment a process needs to reach the server: the AWS
// SDK's standard credential variables.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.Secret,
		"AWS_REGION=" + Region,
	}
}

// SetEnv sets Env in this process for the rest of the test (t.Setenv), so
// that checkpoint.OpenStore in the test finds the credentials.
func (s *Server) SetEnv(t testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	// Keep a developer's own AWS files and profile out of the test.
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "no-aws-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "no-aws-credentials"))
}

// Binary returns versitygw: $DQNFLOW_S3, else bin/versitygw in the module
// root above the working directory, or "" when there is none.
func Binary() string { return testproc.Binary(EnvBinary, "versitygw") }

// Start starts versitygw for the test, creates a bucket and returns the
// server; it is stopped when the test ends. The test fails when no binary
// is found (run `make versitygw`) and is skipped under -short.
func Start(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("needs an S3 server (versitygw); skipped under -short")
	}
	bin := Binary()
	if bin == "" {
		t.Fatalf("no versitygw: run `make versitygw` or set %s", EnvBinary)
	}
	base := t.TempDir()
	s := &Server{Dir: filepath.Join(base, "data"), AccessKey: "dqnflow-" + randomHex(t, 6), Secret: randomHex(t, 20), Bucket: "checkpoints"}
	meta := filepath.Join(base, "meta")
	for _, d := range []string{s.Dir, meta} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The sidecar directory holds object metadata, so the backend needs no
	// extended attributes from the test's file system (tmpfs, overlayfs).
	start := func(ports []int, _ int) *exec.Cmd {
		s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		cmd := exec.Command(bin, "--port", "127.0.0.1:"+strconv.Itoa(ports[0]), "--quiet",
			"posix", "--sidecar", meta, s.Dir)
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.Secret)
		return cmd
	}
	ready := func(p *testproc.Proc, _ []int) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := s.Client()
		for {
			_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)})
			if err == nil {
				return nil
			}
			select {
			case <-p.Exited:
				return fmt.Errorf("exited at start: %v", p.Cmd.ProcessState)
			case <-ctx.Done():
				return fmt.Errorf("at %s: create bucket %s: %w", s.Endpoint, s.Bucket, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	testproc.StartOnFreePorts(t, "versitygw", filepath.Join(base, "versitygw.log"), 1, start, ready)
	return s
}

// Client is an S3 client of the server with the root credentials, for
// what the product never does (create a bucket, damage an object).
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.Secret, ""),
		HTTPClient:   &http.Client{Timeout: 30 * time.Second},
	})
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
