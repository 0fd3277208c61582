//go:build unix

package temporalconn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/files"
)

// TestCredentialFilesAreBoundedRegularFiles: an API key file, a CA file
// or a client certificate or key that is a named pipe, a directory, a
// device or a file over the bound fails at once, naming the flag and the
// file, and never a byte of a key.
func TestCredentialFilesAreBoundedRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte("SECRET"+strings.Repeat("k", MaxCredentialBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(key, []byte("-----BEGIN PRIVATE KEY-----\nSECRET\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, big, dir, "/dev/zero"} {
		for _, c := range []struct {
			flag string
			conn Settings
		}{
			{"--api-key-file", Settings{APIKeyFile: path}},
			{"--tls-ca-path", Settings{CA: path}},
			{"--tls-cert-path", Settings{Cert: path, Key: key}},
			{"--tls-key-path", Settings{Cert: key, Key: path}},
		} {
			done := make(chan error, 1)
			go func() { _, err := c.conn.Options(nil); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, files.ErrNotRegular) && !errors.Is(err, files.ErrTooLarge) ||
					!strings.Contains(err.Error(), c.flag) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "SECRET") {
					t.Errorf("%s %s: %v; want not regular or too large, naming the flag and the file, no key", c.flag, path, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s %s: not returned after 5 s", c.flag, path)
			}
		}
	}
}
