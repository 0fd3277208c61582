package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/temporalconn"
	"github.com/dqnflow/dqnflow/worker/workertest"
)

// testPKI is a throw-away certificate authority with one server and one
// client certificate, written as PEM files.
type testPKI struct {
	ca                    *x509.CertPool
	caPath                string
	server                tls.Certificate
	clientCert, clientKey string
	otherCAPath           string // a CA that signed nothing here
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(1)
	sign := func(tmpl, parent *x509.Certificate, pub, signer any) []byte {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "dqnflow test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER := sign(caTmpl, nil, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	p := &testPKI{ca: x509.NewCertPool(), caPath: write("ca.pem", "CERTIFICATE", caDER)}
	p.ca.AddCert(caCert)

	srvKey := newKey()
	srvDER := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "temporal"}, DNSNames: []string{"temporal.test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		caCert, &srvKey.PublicKey, caKey)
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}

	cliKey := newKey()
	cliDER := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "dqnflow worker"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, caCert, &cliKey.PublicKey, caKey)
	p.clientCert = write("client.pem", "CERTIFICATE", cliDER)
	keyDER, err := x509.MarshalPKCS8PrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	p.clientKey = write("client-key.pem", "PRIVATE KEY", keyDER)

	otherKey := newKey()
	p.otherCAPath = write("other-ca.pem", "CERTIFICATE",
		sign(&x509.Certificate{Subject: pkix.Name{CommonName: "other CA"}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign}, nil, &otherKey.PublicKey, otherKey))
	return p
}

// tlsFrontend serves TLS (mutual when clientCAs is set) on a local port and
// passes each gRPC call on, in plain HTTP/2, to the Temporal server at
// backend, the way a load balancer or Temporal's own frontend with TLS
// does. With apiKey set it refuses calls without "authorization: Bearer
// <apiKey>" with gRPC status UNAUTHENTICATED. It returns its host:port.
func tlsFrontend(t *testing.T, pki *testPKI, backend string, clientCAs *x509.CertPool, apiKey string) string {
	t.Helper()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	target := &url.URL{Scheme: "http", Host: backend}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     tr,
		FlushInterval: -1,
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if apiKey != "" && r.Header.Get("Authorization") != "Bearer "+apiKey {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "16") // UNAUTHENTICATED
			w.Header().Set("Grpc-Message", "missing or wrong API key")
			w.WriteHeader(http.StatusOK)
			return
		}
		proxy.ServeHTTP(w, r)
	})
	cfg := &tls.Config{Certificates: []tls.Certificate{pki.server}, MinVersion: tls.VersionTLS12}
	if clientCAs != nil {
		cfg.ClientCAs, cfg.ClientAuth = clientCAs, tls.RequireAndVerifyClientCert
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, TLSConfig: cfg, ErrorLog: nil}
	go srv.ServeTLS(l, "", "")
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// clearTemporalEnv unsets every connection variable for the test.
func clearTemporalEnv(t *testing.T) {
	for _, k := range []string{temporalconn.EnvAddress, temporalconn.EnvNamespace, temporalconn.EnvTLS, temporalconn.EnvCA, temporalconn.EnvCert,
		temporalconn.EnvKey, temporalconn.EnvServerName, temporalconn.EnvNoVerify, temporalconn.EnvAPIKey, temporalconn.EnvAPIKeyFile} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// TestTemporalClientConnectsOnlyWithTheRightTLSCredentials runs `dqnflow
// schedule list` against a real Temporal dev server behind a TLS frontend,
// once with server TLS, once with mutual TLS and once with an API key, and
// checks that the command works with the right settings, from flags and
// from the environment, and fails with a clear error without them.
func TestTemporalClientConnectsOnlyWithTheRightTLSCredentials(t *testing.T) {
	clearTemporalEnv(t)
	backend, _ := workertest.DevServerAt(t, filepath.Join(t.TempDir(), "temporal.log"))
	pki := newTestPKI(t)
	tlsAddr := tlsFrontend(t, pki, backend, nil, "")
	mtlsAddr := tlsFrontend(t, pki, backend, pki.ca, "")
	const key = "dqnflow-test-key"
	keyAddr := tlsFrontend(t, pki, backend, nil, key)
	keyFile := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string // "" means the command must succeed
	}{
		{name: "plain text to the dev server", args: []string{"--address", backend}},
		{name: "TLS with the CA by flag", args: []string{"--address", tlsAddr, "--tls-ca-path", pki.caPath}},
		{name: "TLS with the CA by environment", env: map[string]string{temporalconn.EnvAddress: tlsAddr, temporalconn.EnvCA: pki.caPath}},
		{name: "TLS with a server name to verify", args: []string{"--address", tlsAddr, "--tls-ca-path", pki.caPath, "--tls-server-name", "temporal.test"}},
		{name: "TLS with the wrong CA", args: []string{"--address", tlsAddr, "--tls-ca-path", pki.otherCAPath}, wantErr: "certificate"},
		{name: "TLS with the wrong server name", args: []string{"--address", tlsAddr, "--tls-ca-path", pki.caPath, "--tls-server-name", "elsewhere.test"}, wantErr: "certificate"},
		{name: "plain text to a TLS server", args: []string{"--address", tlsAddr}, wantErr: "connect to Temporal at " + tlsAddr},
		{name: "mTLS with the client certificate by flag", args: []string{"--address", mtlsAddr, "--tls-ca-path", pki.caPath,
			"--tls-cert-path", pki.clientCert, "--tls-key-path", pki.clientKey}},
		{name: "mTLS with the client certificate by environment", env: map[string]string{temporalconn.EnvAddress: mtlsAddr,
			temporalconn.EnvCA: pki.caPath, temporalconn.EnvCert: pki.clientCert, temporalconn.EnvKey: pki.clientKey}},
		{name: "mTLS without a client certificate", args: []string{"--address", mtlsAddr, "--tls-ca-path", pki.caPath}, wantErr: "connect to Temporal"},
		{name: "mTLS with a certificate and no key", args: []string{"--address", mtlsAddr, "--tls-ca-path", pki.caPath,
			"--tls-cert-path", pki.clientCert}, wantErr: "mutual TLS needs both --tls-cert-path and --tls-key-path"},
		{name: "API key from the environment", args: []string{"--address", keyAddr, "--tls-ca-path", pki.caPath}, env: map[string]string{temporalconn.EnvAPIKey: key}},
		{name: "API key from a file", args: []string{"--address", keyAddr, "--tls-ca-path", pki.caPath, "--api-key-file", keyFile}},
		{name: "API key missing", args: []string{"--address", keyAddr, "--tls-ca-path", pki.caPath}, wantErr: "missing or wrong API key"},
		{name: "API key wrong", args: []string{"--address", keyAddr, "--tls-ca-path", pki.caPath}, env: map[string]string{temporalconn.EnvAPIKey: "nope"}, wantErr: "missing or wrong API key"},
		{name: "API key refused in plain text", args: []string{"--address", backend, "--tls", "false"}, env: map[string]string{temporalconn.EnvAPIKey: key}, wantErr: "never sent in plain text"},
		{name: "API key file missing", args: []string{"--address", keyAddr, "--api-key-file", filepath.Join(t.TempDir(), "absent")}, wantErr: "flag --api-key-file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearTemporalEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := append([]string{"schedule", "list", "--json"}, tc.args...)
			stdout, stderr, code := run(t, args...)
			if tc.wantErr == "" {
				if code != 0 || strings.TrimSpace(stdout) != "[]" {
					t.Fatalf("dqnflow %s: exit %d, stdout %q, stderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
				}
				return
			}
			if code == 0 || !strings.Contains(stderr, tc.wantErr) {
				t.Fatalf("dqnflow %s: exit %d, want a failure saying %q; stderr:\n%s", strings.Join(args, " "), code, tc.wantErr, stderr)
			}
			if strings.Contains(stderr, key) {
				t.Fatalf("the API key appears in the output:\n%s", stderr)
			}
		})
	}
}
