package checkpoint

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/dqnflow/dqnflow/files"
)

// ErrSignature marks a checkpoint refused for its signature: unsigned
// where a key is configured, signed with another key, or changed after it
// was signed. A read's error wraps ErrCorrupt as well, so that recovery
// treats such a file like a damaged one: the run falls back to its
// previous good checkpoint or fails with CorruptCheckpoint, and never
// trains from it.
var ErrSignature = errors.New("checkpoint signature refused")

// Keys signs checkpoints with an Ed25519 private key and verifies them
// with its public key (docs/adr/0032-signed-checkpoints.md). A process
// given the private key signs what it writes and verifies what it reads;
// one given only the public key verifies and cannot write. It never
// prints key material: String names the key by its ID.
type Keys struct {
	private ed25519.PrivateKey // nil when only the public key was given
	public  ed25519.PublicKey
	id      string
}

// maxKeyFileBytes bounds a key file: a PEM Ed25519 key is about 120 bytes.
const maxKeyFileBytes = 64 << 10

// signatureDomain starts every signed message, so that a signature made
// for a checkpoint is never valid for anything else signed with the key.
const signatureDomain = "dqnflow checkpoint header v1\n"

// The signature's metadata value is "ed25519:<16 hex digits of the key
// ID>:<128 hex digits of the signature>".
const (
	sigPrefix   = "ed25519:"
	keyIDDigits = 16
	sigDigits   = 2 * ed25519.SignatureSize
	sigValueLen = len(sigPrefix) + keyIDDigits + 1 + sigDigits
)

// LoadKeys reads the key file at path: PEM, one block, either an Ed25519
// "PRIVATE KEY" (PKCS #8, as `openssl genpkey -algorithm ed25519` and
// GenerateKeys write it) or an Ed25519 "PUBLIC KEY" (PKIX, as
// `openssl pkey -pubout` writes it). The file must be a regular file of
// at most 64 KiB; its content never appears in an error.
func LoadKeys(path string) (*Keys, error) {
	raw, err := files.ReadFile(path, maxKeyFileBytes)
	if err != nil {
		return nil, fmt.Errorf("checkpoint key file: %w", err)
	}
	defer clear(raw)
	block, rest := pem.Decode(raw)
	if block == nil {
		return nil, fmt.Errorf("checkpoint key file %s: no PEM block; want an Ed25519 PRIVATE KEY or PUBLIC KEY", path)
	}
	defer clear(block.Bytes)
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("checkpoint key file %s: more than one PEM block; want exactly one key", path)
	}
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		priv, ok := k.(ed25519.PrivateKey)
		if err != nil || !ok {
			return nil, fmt.Errorf("checkpoint key file %s: the PRIVATE KEY block is not a PKCS #8 Ed25519 key", path)
		}
		// Copies: the parsed keys may share block.Bytes, cleared below.
		priv = bytes.Clone(priv)
		return newKeys(priv, priv.Public().(ed25519.PublicKey)), nil
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		pub, ok := k.(ed25519.PublicKey)
		if err != nil || !ok {
			return nil, fmt.Errorf("checkpoint key file %s: the PUBLIC KEY block is not a PKIX Ed25519 key", path)
		}
		return newKeys(nil, bytes.Clone(pub)), nil
	}
	return nil, fmt.Errorf("checkpoint key file %s: PEM block %q; want an Ed25519 PRIVATE KEY (PKCS #8) or PUBLIC KEY (PKIX)", path, block.Type)
}

// GenerateKeys creates a new Ed25519 key pair: the private key at
// privatePath (PEM PKCS #8, mode 0600) and its public key at
// privatePath+".pub" (PEM PKIX, mode 0644). It never overwrites a file:
// either exists, and nothing is written.
func GenerateKeys(privatePath string) (*Keys, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate checkpoint key: %w", err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("generate checkpoint key: %w", err)
	}
	pk, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("generate checkpoint key: %w", err)
	}
	pubPath := privatePath + ".pub"
	if _, err := os.Lstat(pubPath); err == nil {
		return nil, fmt.Errorf("generate checkpoint key: %s exists; remove it or choose another name", pubPath)
	}
	if err := writeNew(privatePath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), 0o600); err != nil {
		return nil, fmt.Errorf("generate checkpoint key: %w", err)
	}
	if err := writeNew(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pk}), 0o644); err != nil {
		os.Remove(privatePath)
		return nil, fmt.Errorf("generate checkpoint key: %w", err)
	}
	return newKeys(priv, pub), nil
}

// writeNew creates path, which must not exist, with b and mode perm,
// synced to disk.
func writeNew(path string, b []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

func newKeys(priv ed25519.PrivateKey, pub ed25519.PublicKey) *Keys {
	sum := sha256.Sum256(pub)
	return &Keys{private: priv, public: pub, id: hex.EncodeToString(sum[:keyIDDigits/2])}
}

// ID names the key pair: the first 8 bytes of the SHA-256 of the public
// key, in hex. A signature carries the ID of its key, so that a refusal
// can say which key signed a file.
func (k *Keys) ID() string { return k.id }

// CanSign reports whether k holds the private key.
func (k *Keys) CanSign() bool { return k.private != nil }

// String describes k without its key material.
func (k *Keys) String() string {
	if k.CanSign() {
		return "ed25519 key " + k.id + " (signs and verifies)"
	}
	return "ed25519 public key " + k.id + " (verifies only)"
}

// placeholder is the signature value written into a header before it is
// signed: the key ID and 128 zeros.
func (k *Keys) placeholder() string {
	return sigPrefix + k.id + ":" + strings.Repeat("0", sigDigits)
}

// sign fills in the signature of header, which holds k.placeholder() as
// its signature value and hashPlaceholder as its header hash: the message
// is signatureDomain and the SHA-256 of exactly that header, which covers
// every metadata value and, through tensors_sha256, the data section.
func (k *Keys) sign(header []byte) error {
	if !k.CanSign() {
		return fmt.Errorf("%w: the key file holds only the public key %s; a process that writes checkpoints needs the private key", ErrSignature, k.id)
	}
	at, err := valueAt(header, MetaSignature, sigValueLen)
	if err != nil {
		return err
	}
	sig := ed25519.Sign(k.private, signedMessage(header))
	hex.Encode(header[at+sigValueLen-sigDigits:at+sigValueLen], sig)
	return nil
}

// verify checks the signature of a decoded header against k's public key.
func (k *Keys) verify(meta map[string]string, header []byte) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: byte 8: %s (%w)", ErrCorrupt, fmt.Sprintf(format, args...), ErrSignature)
	}
	v, ok := meta[MetaSignature]
	if !ok {
		return refuse("the file is not signed; this process accepts only checkpoints signed with key %s", k.id)
	}
	id, sigHex, ok := parseSignature(v)
	if !ok {
		return refuse("metadata %s is not %s<key id>:<%d hex digits>", MetaSignature, sigPrefix, sigDigits)
	}
	if id != k.id {
		return refuse("the file is signed with key %s; this process accepts only key %s", id, k.id)
	}
	sig, err := hex.DecodeString(sigHex)
	if err != nil {
		return refuse("metadata %s is not hex", MetaSignature)
	}
	at, err := valueAt(header, MetaSignature, sigValueLen)
	if err != nil {
		return refuse("%v", err)
	}
	hat, err := headerHashAt(header)
	if err != nil {
		return refuse("%v", err)
	}
	signed := bytes.Clone(header)
	copy(signed[hat:], hashPlaceholder)
	copy(signed[at+sigValueLen-sigDigits:], strings.Repeat("0", sigDigits))
	if !ed25519.Verify(k.public, signedMessage(signed), sig) {
		return refuse("the signature of key %s does not match the file: it was changed after it was signed", id)
	}
	return nil
}

// parseSignature splits a signature value into its key ID and signature
// digits.
func parseSignature(v string) (id, sig string, ok bool) {
	rest, ok := strings.CutPrefix(v, sigPrefix)
	if !ok || len(v) != sigValueLen || rest[keyIDDigits] != ':' {
		return "", "", false
	}
	return rest[:keyIDDigits], rest[keyIDDigits+1:], true
}

// signedMessage is what a signature signs for header (with its header
// hash and signature digits zeroed).
func signedMessage(header []byte) []byte {
	sum := sha256.Sum256(header)
	return append([]byte(signatureDomain), sum[:]...)
}
