package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/dqnflow/dqnflow/files"
)

// Environment variables of the Temporal connection: the names the Temporal
// CLI itself reads (its "implied-env" of the same flags), so one set of
// variables serves both tools. TEMPORAL_API_KEY_FILE is ours: a key read
// from a file stays out of the environment of child processes.
const (
	envTemporalAddress   = "TEMPORAL_ADDRESS"   // host:port, default 127.0.0.1:7233
	envTemporalNamespace = "TEMPORAL_NAMESPACE" // default "default"
	envTemporalTLS       = "TEMPORAL_TLS"
	envTemporalCA        = "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
	envTemporalCert      = "TEMPORAL_TLS_CLIENT_CERT_PATH"
	envTemporalKey       = "TEMPORAL_TLS_CLIENT_KEY_PATH"
	envTemporalSNI       = "TEMPORAL_TLS_SERVER_NAME"
	envTemporalNoVerify  = "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"
	envTemporalAPIKey    = "TEMPORAL_API_KEY"
	envTemporalAPIKeyF   = "TEMPORAL_API_KEY_FILE"
)

// temporalConn is how the CLI reaches Temporal, the one place its
// connection settings are read: each setting is a flag of the commands
// that talk to Temporal (register) or else the environment variable
// named beside it. TLS is on when --tls says so or when a CA, client
// certificate or API key is given (as in the Temporal CLI); a client
// certificate and key make it mutual TLS; an API key is sent as a bearer
// token on every call. The key is taken from a file or the environment,
// never from a flag value, which every user of the machine can read in
// the process list.
type temporalConn struct {
	addr, ns                  string
	tls                       string // "", "true" or "false": unset, on, off
	ca, cert, key, serverName string
	noVerify                  bool
	apiKeyFile                string
	local                     bool // dqnflow dev's own plain-text server
}

// groupTemporalFlags heads the connection flags in help.
const groupTemporalFlags = "Temporal connection"

// register adds the connection flags to fs, with the environment's values
// as defaults, under their own heading in help. Every command that talks
// to Temporal calls it in its flag block.
func (c *temporalConn) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.addr, "address", getenv(envTemporalAddress, "127.0.0.1:7233"), "Temporal frontend host:port ($"+envTemporalAddress+")")
	fs.StringVar(&c.ns, "namespace", getenv(envTemporalNamespace, "default"), "Temporal namespace ($"+envTemporalNamespace+")")
	fs.StringVar(&c.tls, "tls", os.Getenv(envTemporalTLS), "true or false: TLS to Temporal; on by default when a CA, client certificate or API key is given ($"+envTemporalTLS+")")
	fs.StringVar(&c.ca, "tls-ca-path", os.Getenv(envTemporalCA), "PEM file of the CA that signed the server's certificate; default the system roots ($"+envTemporalCA+")")
	fs.StringVar(&c.cert, "tls-cert-path", os.Getenv(envTemporalCert), "PEM client certificate for mutual TLS ($"+envTemporalCert+")")
	fs.StringVar(&c.key, "tls-key-path", os.Getenv(envTemporalKey), "PEM private key of --tls-cert-path ($"+envTemporalKey+")")
	fs.StringVar(&c.serverName, "tls-server-name", os.Getenv(envTemporalSNI), "server name to verify instead of the address's host ($"+envTemporalSNI+")")
	noVerify, _ := strconv.ParseBool(os.Getenv(envTemporalNoVerify))
	fs.BoolVar(&c.noVerify, "tls-disable-host-verification", noVerify, "accept any server certificate: for tests only ($"+envTemporalNoVerify+")")
	fs.StringVar(&c.apiKeyFile, "api-key-file", os.Getenv(envTemporalAPIKeyF), "file holding the API key sent as a bearer token ($"+envTemporalAPIKeyF+", or the key itself in $"+envTemporalAPIKey+")")
	groupFlags(fs, groupTemporalFlags, "address", "namespace", "tls", "tls-ca-path", "tls-cert-path", "tls-key-path",
		"tls-server-name", "tls-disable-host-verification", "api-key-file")
}

func (c *temporalConn) address() string {
	if c.addr != "" && !c.local {
		return c.addr
	}
	return getenv(envTemporalAddress, "127.0.0.1:7233")
}

func (c *temporalConn) namespace() string {
	if c.ns != "" && !c.local {
		return c.ns
	}
	return getenv(envTemporalNamespace, "default")
}

// options returns the SDK client options: address, namespace, TLS and
// credentials, and logger. A setting that cannot be used is an error that
// names its flag, its environment variable and the file.
func (c *temporalConn) options(logger tlog.Logger) (client.Options, error) {
	o := client.Options{HostPort: c.address(), Namespace: c.namespace(), Logger: logger}
	if c.local {
		return o, nil
	}
	apiKey, err := c.apiKey()
	if err != nil {
		return o, err
	}
	if apiKey != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(apiKey)
	}
	on := c.ca != "" || c.cert != "" || c.key != "" || c.serverName != "" || c.noVerify || apiKey != ""
	if c.tls != "" {
		v, err := strconv.ParseBool(c.tls)
		if err != nil {
			return o, fmt.Errorf("%w: flag --tls (or $%s) %q: want true or false", errUsage, envTemporalTLS, c.tls)
		}
		if !v && on {
			return o, fmt.Errorf("%w: flag --tls (or $%s) is false, but TLS settings or an API key are given; "+
				"an API key is never sent in plain text", errUsage, envTemporalTLS)
		}
		on = v
	}
	if !on {
		return o, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.serverName, InsecureSkipVerify: c.noVerify}
	if c.ca != "" {
		pem, err := files.ReadFile(c.ca, maxCredentialBytes)
		if err != nil {
			return o, fmt.Errorf("flag --tls-ca-path (or $%s): %w", envTemporalCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return o, fmt.Errorf("flag --tls-ca-path (or $%s): %s holds no PEM certificate", envTemporalCA, c.ca)
		}
		cfg.RootCAs = pool
	}
	switch {
	case c.cert != "" && c.key != "":
		certPEM, err := files.ReadFile(c.cert, maxCredentialBytes)
		var keyPEM []byte
		if err == nil {
			keyPEM, err = files.ReadFile(c.key, maxCredentialBytes)
		}
		var pair tls.Certificate
		if err == nil {
			pair, err = tls.X509KeyPair(certPEM, keyPEM)
		}
		if err != nil {
			return o, fmt.Errorf("flags --tls-cert-path %s and --tls-key-path %s (or $%s, $%s): %w", c.cert, c.key, envTemporalCert, envTemporalKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case c.cert != "" || c.key != "":
		return o, fmt.Errorf("%w: mutual TLS needs both --tls-cert-path and --tls-key-path (or $%s and $%s)", errUsage, envTemporalCert, envTemporalKey)
	}
	o.ConnectionOptions.TLS = cfg
	return o, nil
}

// maxCredentialBytes bounds a certificate, key or API key file: a PEM
// chain of a few certificates is some kilobytes.
const maxCredentialBytes = 1 << 20

// apiKey returns the API key from --api-key-file, else $TEMPORAL_API_KEY.
func (c *temporalConn) apiKey() (string, error) {
	if c.apiKeyFile == "" {
		return strings.TrimSpace(os.Getenv(envTemporalAPIKey)), nil
	}
	b, err := files.ReadFile(c.apiKeyFile, maxCredentialBytes)
	if err != nil {
		return "", fmt.Errorf("flag --api-key-file (or $%s): %w", envTemporalAPIKeyF, err)
	}
	k := strings.TrimSpace(string(b))
	if k == "" {
		return "", fmt.Errorf("flag --api-key-file (or $%s): %s is empty", envTemporalAPIKeyF, c.apiKeyFile)
	}
	return k, nil
}

// clientOptions are the Temporal client options of the CLI (temporalConn)
// with the SDK's log at warn level and above only, so command output stays
// readable.
func clientOptions(e *env) (client.Options, error) {
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	o, err := e.conn.options(logger)
	o.MetricsHandler = e.metrics
	return o, err
}
