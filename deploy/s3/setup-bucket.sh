#!/bin/sh
# The checkpoint bucket, made once per `docker compose up` by the s3-setup
# service (amazon/aws-cli image): wait until the s3 service answers, then
# create the bucket DQNFLOW_S3_BUCKET unless it exists. The AWS CLI reads the
# endpoint (AWS_ENDPOINT_URL), region and credentials from the environment.
# Bounded retries; the script fails loudly after them, so the workers never
# start against a store without its bucket.
set -eu

: "${DQNFLOW_S3_BUCKET:?}"
TRIES="${SETUP_TRIES:-90}" # two seconds apart: three minutes

i=1
until aws s3api list-buckets >/dev/null 2>&1; do
  if [ "$i" -ge "$TRIES" ]; then
    echo "dqnflow: the S3 service at ${AWS_ENDPOINT_URL:-AWS} did not answer after ${TRIES} tries" >&2
    aws s3api list-buckets # prints the last error
    exit 1
  fi
  i=$((i + 1))
  sleep 2
done
if aws s3api head-bucket --bucket "$DQNFLOW_S3_BUCKET" >/dev/null 2>&1; then
  echo "dqnflow: bucket ${DQNFLOW_S3_BUCKET} exists"
else
  aws s3api create-bucket --bucket "$DQNFLOW_S3_BUCKET" >/dev/null
  echo "dqnflow: bucket ${DQNFLOW_S3_BUCKET} created"
fi
