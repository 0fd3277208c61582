// Package checkpoint reads and writes dqnflow checkpoints: one safetensors
// file holding every tensor of a trainer's state and, in the safetensors
// metadata, the format version, run id, epoch, global step, precision and the
// full config. docs/checkpoint-format.md documents every tensor.
package checkpoint

// FormatVersion is the version of the tensor layout written by this code.
const FormatVersion = "1"

// Metadata keys written into the safetensors "__metadata__" object. All
// values are strings, as safetensors requires.
const (
	MetaFormat     = "format_version"
	MetaRunID      = "run_id"
	MetaEpoch      = "epoch"
	MetaGlobalStep = "global_step"
	MetaPrecision  = "precision"
	MetaBackend    = "backend"
	MetaConfig     = "config"     // RunConfig JSON, defaults filled in
	MetaInstrument = "instrument" // market.Instrument JSON, resolved values
	MetaNormalizer = "normalizer" // market.Normalizer JSON: feature mean and std
	MetaDType      = "dtype"      // exported files only: the dtype of every tensor
	MetaDevice     = "device"     // the device that trained it, as trainer.Info.Device
	MetaSelfCheck  = "self_check" // the backend's start-up precision check, as trainer.Info.SelfCheck
	MetaTuning     = "tuning"     // the backend's tuning (JSON), as trainer.Info.Tuning; absent without one
	MetaArch       = "arch"       // GOOS/GOARCH of the process that wrote it (trainer.Origin)
	// MetaPanel is set in the checkpoints of a panel run (data.series):
	// its series, their files' SHA-256 and ranges (market.PanelSeries
	// JSON, a list; market.Panel.Meta). The name is from the walk-forward
	// study, the first to train panels.
	MetaPanel = "walkforward_panel"
	// MetaPanelInstrument is, in a panel run's checkpoint, the instrument
	// of its joined training set (market.JoinPanel: the costs live in its
	// bars), which its trainer was built on and restores into; a panel
	// run's MetaInstrument is its first series' own (trainer.PanelMeta).
	MetaPanelInstrument = "panel_instrument"
	// MetaNotBitExact says why the run is no longer bit-identical to an
	// uninterrupted one on one machine (a resume on another backend, device
	// or architecture: trainer.ResumeExactness); absent while it is.
	MetaNotBitExact = "not_bit_exact"
)

// Integrity keys, added by Encode and checked by Decode, so that a file alone
// can be verified. Both are lower-case hex SHA-256 digests.
const (
	// MetaTensorsSHA256 is the hash of the data section (every byte after
	// the header).
	MetaTensorsSHA256 = "tensors_sha256"
	// MetaHeaderSHA256 is the hash of the header (the N bytes after the
	// length prefix, padding included) in which the 64 digits of this
	// value are replaced by '0'.
	MetaHeaderSHA256 = "header_sha256"
	// MetaSignature is the optional Ed25519 signature of the file, written
	// when the writer has a key (Options.Keys) and checked by every reader
	// that has one: "ed25519:<key id>:<128 hex digits>", see sign.go.
	MetaSignature = "signature"
)

// DType is a safetensors dtype name.
type DType string

// The dtypes dqnflow writes.
const (
	F32  DType = "F32"
	F64  DType = "F64"
	BF16 DType = "BF16"
	F16  DType = "F16"
	I32  DType = "I32"
	I64  DType = "I64"
	U8   DType = "U8"
)

// Size is the width of one element in bytes.
func (d DType) Size() int {
	switch d {
	case F64, I64:
		return 8
	case F32, I32:
		return 4
	case BF16, F16:
		return 2
	case U8:
		return 1
	}
	return 0
}

// Tensor is one named array, little-endian, row-major.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Checkpoint is a trainer's state: tensors in the order they are written and
// string metadata.
type Checkpoint struct {
	Meta    map[string]string
	Tensors []Tensor
}
