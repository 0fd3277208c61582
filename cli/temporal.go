package cli

import (
	"log/slog"
	"os"
	"strconv"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/dqnflow/dqnflow/temporalconn"
)

// temporalConn is how the CLI reaches Temporal, the one place its
// connection settings are read: each setting is a flag of the commands
// that talk to Temporal (register) or else the environment variable
// named beside it (temporalconn.Env*). temporalconn.Settings says when
// TLS is on and how the API key is sent; the key is taken from a file or
// the environment, never from a flag value, which every user of the
// machine can read in the process list.
type temporalConn struct {
	s     temporalconn.Settings
	local bool // dqnflow dev's own plain-text server
}

// groupTemporalFlags heads the connection flags in help.
const groupTemporalFlags = "Temporal connection"

// register adds the connection flags to fs, with the environment's values
// as defaults, under their own heading in help. Every command that talks
// to Temporal calls it in its flag block.
func (c *temporalConn) register(fs *pflag.FlagSet) {
	s := &c.s
	fs.StringVar(&s.Address, "address", getenv(temporalconn.EnvAddress, "127.0.0.1:7233"), "Temporal frontend host:port ($"+temporalconn.EnvAddress+")")
	fs.StringVar(&s.Namespace, "namespace", getenv(temporalconn.EnvNamespace, "default"), "Temporal namespace ($"+temporalconn.EnvNamespace+")")
	fs.StringVar(&s.TLS, "tls", os.Getenv(temporalconn.EnvTLS), "true or false: TLS to Temporal; on by default when a CA, client certificate or API key is given ($"+temporalconn.EnvTLS+")")
	fs.StringVar(&s.CA, "tls-ca-path", os.Getenv(temporalconn.EnvCA), "PEM file of the CA that signed the server's certificate; default the system roots ($"+temporalconn.EnvCA+")")
	fs.StringVar(&s.Cert, "tls-cert-path", os.Getenv(temporalconn.EnvCert), "PEM client certificate for mutual TLS ($"+temporalconn.EnvCert+")")
	fs.StringVar(&s.Key, "tls-key-path", os.Getenv(temporalconn.EnvKey), "PEM private key of --tls-cert-path ($"+temporalconn.EnvKey+")")
	fs.StringVar(&s.ServerName, "tls-server-name", os.Getenv(temporalconn.EnvServerName), "server name to verify instead of the address's host ($"+temporalconn.EnvServerName+")")
	noVerify, _ := strconv.ParseBool(os.Getenv(temporalconn.EnvNoVerify))
	fs.BoolVar(&s.NoVerify, "tls-disable-host-verification", noVerify, "accept any server certificate: for tests only ($"+temporalconn.EnvNoVerify+")")
	fs.StringVar(&s.APIKeyFile, "api-key-file", os.Getenv(temporalconn.EnvAPIKeyFile), "file holding the API key sent as a bearer token ($"+temporalconn.EnvAPIKeyFile+", or the key itself in $"+temporalconn.EnvAPIKey+")")
	groupFlags(fs, groupTemporalFlags, "address", "namespace", "tls", "tls-ca-path", "tls-cert-path", "tls-key-path",
		"tls-server-name", "tls-disable-host-verification", "api-key-file")
}

func (c *temporalConn) address() string {
	if c.s.Address != "" && !c.local {
		return c.s.Address
	}
	return getenv(temporalconn.EnvAddress, "127.0.0.1:7233")
}

func (c *temporalConn) namespace() string {
	if c.s.Namespace != "" && !c.local {
		return c.s.Namespace
	}
	return getenv(temporalconn.EnvNamespace, "default")
}

// options returns the SDK client options of the settings
// (temporalconn.Settings.Options); dqnflow dev's own server gets address,
// namespace and logger only.
func (c *temporalConn) options(logger tlog.Logger) (client.Options, error) {
	s := c.s
	s.Address, s.Namespace = c.address(), c.namespace()
	if c.local {
		return client.Options{HostPort: s.Address, Namespace: s.Namespace, Logger: logger}, nil
	}
	if s.APIKeyFile == "" {
		s.APIKey = os.Getenv(temporalconn.EnvAPIKey)
	}
	return s.Options(logger)
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
