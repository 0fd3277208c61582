// Package temporalconn builds the Temporal SDK's client options from
// plain connection settings: address, namespace, TLS (a CA, a client
// certificate and key for mutual TLS, a server name) and an API key sent
// as a bearer token. It reads no flag and no environment variable; the
// front end fills Settings (cli from its flags and the variables named
// here) and every message names the flag and the variable of the setting
// that cannot be used, so the command line's errors stay as they were.
package temporalconn

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strconv"
	"strings"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/dqnflow/dqnflow/files"
	"github.com/dqnflow/dqnflow/internal/usage"
)

// Environment variables of the Temporal connection: the names the Temporal
// CLI itself reads (its "implied-env" of the same flags), so one set of
// variables serves both tools. TEMPORAL_API_KEY_FILE is ours: a key read
// from a file stays out of the environment of child processes.
const (
	EnvAddress    = "TEMPORAL_ADDRESS"   // host:port, default 127.0.0.1:7233
	EnvNamespace  = "TEMPORAL_NAMESPACE" // default "default"
	EnvTLS        = "TEMPORAL_TLS"
	EnvCA         = "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
	EnvCert       = "TEMPORAL_TLS_CLIENT_CERT_PATH"
	EnvKey        = "TEMPORAL_TLS_CLIENT_KEY_PATH"
	EnvServerName = "TEMPORAL_TLS_SERVER_NAME"
	EnvNoVerify   = "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"
	EnvAPIKey     = "TEMPORAL_API_KEY"
	EnvAPIKeyFile = "TEMPORAL_API_KEY_FILE"
)

// Settings are the connection settings. TLS is on when TLS says so or
// when a CA, client certificate or API key is given (as in the Temporal
// CLI); a client certificate and key make it mutual TLS; an API key is
// sent as a bearer token on every call. The key is taken from APIKeyFile,
// else APIKey (the front end's $TEMPORAL_API_KEY), never from a flag value.
type Settings struct {
	Address, Namespace        string
	TLS                       string // "", "true" or "false": unset, on, off
	CA, Cert, Key, ServerName string
	NoVerify                  bool
	APIKeyFile                string
	APIKey                    string // used when APIKeyFile is empty
}

// MaxCredentialBytes bounds a certificate, key or API key file: a PEM
// chain of a few certificates is some kilobytes.
const MaxCredentialBytes = 1 << 20

// Options returns the SDK client options: address, namespace, TLS and
// credentials, and logger. A setting that cannot be used is an error that
// names its flag, its environment variable and the file.
func (s Settings) Options(logger tlog.Logger) (client.Options, error) {
	o := client.Options{HostPort: s.Address, Namespace: s.Namespace, Logger: logger}
	apiKey, err := s.apiKey()
	if err != nil {
		return o, err
	}
	if apiKey != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(apiKey)
	}
	on := s.CA != "" || s.Cert != "" || s.Key != "" || s.ServerName != "" || s.NoVerify || apiKey != ""
	if s.TLS != "" {
		v, err := strconv.ParseBool(s.TLS)
		if err != nil {
			return o, fmt.Errorf("%w: flag --tls (or $%s) %q: want true or false", usage.Err, EnvTLS, s.TLS)
		}
		if !v && on {
			return o, fmt.Errorf("%w: flag --tls (or $%s) is false, but TLS settings or an API key are given; "+
				"an API key is never sent in plain text", usage.Err, EnvTLS)
		}
		on = v
	}
	if !on {
		return o, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName, InsecureSkipVerify: s.NoVerify}
	if s.CA != "" {
		pem, err := files.ReadFile(s.CA, MaxCredentialBytes)
		if err != nil {
			return o, fmt.Errorf("flag --tls-ca-path (or $%s): %w", EnvCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return o, fmt.Errorf("flag --tls-ca-path (or $%s): %s holds no PEM certificate", EnvCA, s.CA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case s.Cert != "" && s.Key != "":
		certPEM, err := files.ReadFile(s.Cert, MaxCredentialBytes)
		var keyPEM []byte
		if err == nil {
			keyPEM, err = files.ReadFile(s.Key, MaxCredentialBytes)
		}
		var pair tls.Certificate
		if err == nil {
			pair, err = tls.X509KeyPair(certPEM, keyPEM)
		}
		if err != nil {
			return o, fmt.Errorf("flags --tls-cert-path %s and --tls-key-path %s (or $%s, $%s): %w", s.Cert, s.Key, EnvCert, EnvKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case s.Cert != "" || s.Key != "":
		return o, fmt.Errorf("%w: mutual TLS needs both --tls-cert-path and --tls-key-path (or $%s and $%s)", usage.Err, EnvCert, EnvKey)
	}
	o.ConnectionOptions.TLS = cfg
	return o, nil
}

// apiKey returns the API key from APIKeyFile, else APIKey.
func (s Settings) apiKey() (string, error) {
	if s.APIKeyFile == "" {
		return strings.TrimSpace(s.APIKey), nil
	}
	b, err := files.ReadFile(s.APIKeyFile, MaxCredentialBytes)
	if err != nil {
		return "", fmt.Errorf("flag --api-key-file (or $%s): %w", EnvAPIKeyFile, err)
	}
	k := strings.TrimSpace(string(b))
	if k == "" {
		return "", fmt.Errorf("flag --api-key-file (or $%s): %s is empty", EnvAPIKeyFile, s.APIKeyFile)
	}
	return k, nil
}
