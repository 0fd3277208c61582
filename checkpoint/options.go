package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"gocloud.dev/blob"
)

// DefaultMaxBytes is the largest checkpoint file a process reads or
// writes unless Options.MaxBytes says otherwise: 4 GiB. The default
// model's checkpoint is about 15 MB (4.6 MB of networks and optimiser,
// 100 bytes a replay transition at replay.capacity 100,000); 4 GiB holds
// a replay buffer of about 40 million transitions. A larger buffer needs
// a larger limit on every worker (--checkpoint-max-bytes), and the limit
// is what keeps a hostile or damaged file from taking a worker's memory.
const DefaultMaxBytes int64 = 4 << 30

// Options are what a process reads and writes checkpoints with: the
// largest file it accepts and the key it signs and verifies with. The zero
// value reads and writes files up to DefaultMaxBytes, unsigned, and does
// not look at signatures.
type Options struct {
	// MaxBytes bounds every checkpoint file read (checked against the
	// file's size before anything is allocated) and written (a larger one
	// is refused before it is stored, since no reader could load it).
	// Zero or negative means DefaultMaxBytes.
	MaxBytes int64
	// Keys, when not nil, signs every checkpoint written (it must hold a
	// private key) and makes every read refuse a checkpoint that does not
	// carry a valid signature of its public key (ErrSignature).
	Keys *Keys
	// Buckets opens the bucket of an s3:// store (OpenStore): bucket.OpenS3
	// of package checkpoint/bucket, which links the AWS SDK. Nil refuses s3
	// locations, as the packages that only read and write files need.
	Buckets BucketOpener
}

// BucketOpener opens the bucket an s3:// URL names (its host and query;
// the path is the store's prefix, which the store keeps itself).
type BucketOpener func(ctx context.Context, u *url.URL) (*blob.Bucket, error)

// maxBytes is the effective size limit of o.
func (o Options) maxBytes() int64 {
	if o.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return o.MaxBytes
}

// ErrTooLarge marks a checkpoint file larger than Options.MaxBytes. A
// read's error also wraps ErrCorrupt, so that recovery treats the file
// like a damaged one; a write's does not: the trainer state is too large
// for the limit, which is a configuration matter.
var ErrTooLarge = errors.New("checkpoint larger than the size limit")

// tooLarge is the error of a file of size bytes over the limit max.
func tooLarge(what string, size, max int64) error {
	return fmt.Errorf("%s has %d bytes, more than the limit of %d (%w; raise it with --checkpoint-max-bytes on every worker and command that reads it)",
		what, size, max, ErrTooLarge)
}
