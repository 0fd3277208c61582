package checkpoint

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keyPair generates a key pair in a directory of the test and returns the
// private and the public key as LoadKeys reads them from their files.
func keyPair(t *testing.T) (private, public *Keys) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "checkpoint.key")
	made, err := GenerateKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	if private, err = LoadKeys(path); err != nil {
		t.Fatal(err)
	}
	if public, err = LoadKeys(path + ".pub"); err != nil {
		t.Fatal(err)
	}
	if made.ID() != private.ID() || private.ID() != public.ID() || !private.CanSign() || public.CanSign() {
		t.Fatalf("key IDs %s, %s, %s; signing %t, %t", made.ID(), private.ID(), public.ID(), private.CanSign(), public.CanSign())
	}
	return private, public
}

// TestSignedCheckpointRoundTrips: a checkpoint written with a private key
// reads back with it and with its public key (Info.SignedBy names the
// key); a reader without a key reads it too, without checking. Signing is
// deterministic, so a retried write gives the same bytes; the signature
// is in Info.Meta, not in the Checkpoint's Meta, so rewriting a read
// checkpoint never carries a stale signature over.
func TestSignedCheckpointRoundTrips(t *testing.T) {
	priv, pub := keyPair(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	wrote, err := Write(path, mixed(), Options{Keys: priv})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(path)
	if _, err := Write(path, mixed(), Options{Keys: priv}); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(first, again) {
		t.Error("writing the same checkpoint twice with the same key gave different bytes")
	}
	if wrote.SignedBy != priv.ID() || !strings.HasPrefix(wrote.Meta[MetaSignature], "ed25519:"+priv.ID()+":") {
		t.Errorf("Write info: signed by %q, signature %q", wrote.SignedBy, wrote.Meta[MetaSignature])
	}
	for name, k := range map[string]*Keys{"private": priv, "public": pub} {
		ck, info, err := Read(t.Context(), path, Options{Keys: k})
		if err != nil {
			t.Fatalf("Read with the %s key: %v", name, err)
		}
		if info.SignedBy != priv.ID() || info.SHA256 != wrote.SHA256 {
			t.Errorf("Read with the %s key: signed by %q, sha256 %s; want %s, %s", name, info.SignedBy, info.SHA256, priv.ID(), wrote.SHA256)
		}
		if _, ok := ck.Meta[MetaSignature]; ok {
			t.Errorf("the checkpoint's Meta carries the signature")
		}
	}
	if _, info, err := Read(t.Context(), path, Options{}); err != nil || info.SignedBy != "" {
		t.Errorf("Read without a key: signed by %q, %v; want it read, the signature unchecked", info.SignedBy, err)
	}
	unsigned, err := Write(filepath.Join(dir, "plain.safetensors"), mixed(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if unsigned.SHA256 == wrote.SHA256 || unsigned.SignedBy != "" {
		t.Error("the signed and the unsigned file are the same")
	}
}

// TestSignatureRefusals: with a key configured, a reader refuses an
// unsigned file, a file signed with another key, a file whose metadata or
// tensor data changed after it was signed (hashes recomputed, as anyone
// can), and a malformed signature. Each error wraps ErrSignature and
// ErrCorrupt (so recovery falls back as from a damaged file) and names
// the file; a private key refuses the same as its public key.
func TestSignatureRefusals(t *testing.T) {
	priv, pub := keyPair(t)
	other, _ := keyPair(t)
	dir := t.TempDir()
	write := func(name string, opt Options, edit func([]byte) []byte) string {
		path := filepath.Join(dir, name)
		if _, err := Write(path, mixed(), opt); err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path, reseal(edit(b)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return path
	}
	replace := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte {
			if !bytes.Contains(b, []byte(old)) {
				t.Fatalf("the file has no %q", old)
			}
			return bytes.Replace(b, []byte(old), []byte(new), 1)
		}
	}
	signed := Options{Keys: priv}
	cases := []struct {
		name, path, want string
	}{
		{"unsigned", write("unsigned.safetensors", Options{}, nil), "not signed"},
		{"another key", write("other.safetensors", Options{Keys: other}, nil), "signed with key " + other.ID()},
		{"metadata changed", write("meta.safetensors", signed, replace(`"run_id":"run-α"`, `"run_id":"run-β"`)), "does not match the file"},
		{"data changed", write("data.safetensors", signed, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "does not match the file"},
		{"signature cut", write("cut.safetensors", signed, replace(`"signature":"ed25519:`, `"signature":"ed25518:`)), "is not ed25519:"},
	}
	for _, c := range cases {
		for name, k := range map[string]*Keys{"private": priv, "public": pub} {
			_, _, err := Read(t.Context(), c.path, Options{Keys: k})
			if !errors.Is(err, ErrSignature) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
				t.Errorf("%s, read with the %s key: %v; want ErrSignature and ErrCorrupt naming the file and %q", c.name, name, err, c.want)
			}
		}
	}
	// Without a key, only the integrity hashes count: the resealed files
	// read, which is what a signature is for.
	if _, _, err := Read(t.Context(), cases[2].path, Options{}); err != nil {
		t.Errorf("the resealed file without a key: %v", err)
	}
}

// TestPublicKeyCannotWrite: a writer with only the public key refuses,
// writing nothing.
func TestPublicKeyCannotWrite(t *testing.T) {
	_, pub := keyPair(t)
	dir := t.TempDir()
	_, err := Write(filepath.Join(dir, "ck.safetensors"), tiny(), Options{Keys: pub})
	if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), "needs the private key") {
		t.Errorf("Write with a public key: %v", err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("the refused write left %v", names)
	}
}

// TestLoadKeysRefusesBadKeyFiles: what is not one PEM Ed25519 key is
// refused naming the file and the reason, never its content; a key file
// is read bounded (64 KiB) and only if it is a regular file; GenerateKeys
// never overwrites a key.
func TestLoadKeysRefusesBadKeyFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pemOf := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsa8, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecPub, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	good := filepath.Join(dir, "good.key")
	if _, err := GenerateKeys(good); err != nil {
		t.Fatal(err)
	}
	goodPEM, _ := os.ReadFile(good)
	const secret = "hunter2-do-not-print-me"
	cases := []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "none.key"), "no such file"},
		{"directory", dir, "not a regular file: it is a directory"},
		{"not PEM", file("secret.txt", []byte(secret+"\n")), "no PEM block"},
		{"too large", file("big.key", bytes.Repeat([]byte("A"), maxKeyFileBytes+1)), "over the size limit: 65537 bytes, the limit is 65536"},
		{"two blocks", file("two.key", append(bytes.Clone(goodPEM), goodPEM...)), "more than one PEM block"},
		{"RSA key", file("rsa.key", pemOf("PRIVATE KEY", rsa8)), "not a PKCS #8 Ed25519 key"},
		{"ECDSA public key", file("ec.pub", pemOf("PUBLIC KEY", ecPub)), "not a PKIX Ed25519 key"},
		{"other block", file("cert.pem", pemOf("CERTIFICATE", []byte(secret))), `PEM block "CERTIFICATE"`},
	}
	for _, c := range cases {
		_, err := LoadKeys(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: %v; want an error naming %s and %q", c.name, err, c.path, c.want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error repeats the file's content: %v", c.name, err)
		}
	}
	if k, err := LoadKeys(good); err != nil || k.String() != "ed25519 key "+k.ID()+" (signs and verifies)" {
		t.Errorf("LoadKeys(%s) = %v, %v", good, k, err)
	}
	if _, err := GenerateKeys(good); err == nil {
		t.Error("GenerateKeys overwrote an existing key")
	}
	if again, _ := os.ReadFile(good); !bytes.Equal(again, goodPEM) {
		t.Error("the existing key changed")
	}
	if st, err := os.Stat(good); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v, %v; want 0600", st.Mode().Perm(), err)
	}
}
