// Package bucket opens the buckets of s3:// checkpoint stores on any
// S3-compatible server (AWS, MinIO, Ceph, R2, versitygw) through the AWS
// SDK. It lives apart from package checkpoint so that the packages that
// read and write checkpoints without opening a store (the trainers,
// activities and, through them, the deterministic workflows) do not link
// the SDK: a program that opens s3:// stores passes OpenS3 as
// checkpoint.Options.Buckets.
package bucket

import (
	"context"
	"net/url"

	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// OpenS3 opens the S3 bucket u names (s3://bucket?query; the path is
// ignored). Query parameters configure the client as gocloud.dev/blob/s3blob
// documents them (region, endpoint, use_path_style, profile, ...);
// credentials come from the AWS SDK's standard chain (AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY, AWS_PROFILE with ~/.aws/credentials and
// ~/.aws/config, or the instance's role).
func OpenS3(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	opener := &s3blob.URLOpener{}
	return opener.OpenBucketURL(ctx, &url.URL{Scheme: "s3", Host: u.Host, RawQuery: u.RawQuery})
}
