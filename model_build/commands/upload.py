"""`python -m model_build upload`: put one file under its content-addressed S3 key."""

from __future__ import annotations

import argparse
from pathlib import Path

from model_build.upload import DEFAULT_PART_SIZE, make_s3_client, upload_file

NAME = "upload"
HELP = "Upload a file to S3 (SHA-256 checked); skips a key holding the same bytes, refuses different bytes."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE", help="file to upload, e.g. an archive from `package`")
    parser.add_argument("--bucket", required=True, help="artifact bucket name")
    parser.add_argument("--key", required=True, help="object key, e.g. from `python -m model_build key`")
    parser.add_argument("--endpoint-url", default=None, help="S3 endpoint (e.g. a local moto_server). Default: AWS")
    parser.add_argument("--region", default=None, help="AWS region. Default: from the AWS environment/profile")
    parser.add_argument(
        "--part-size-mib",
        type=int,
        default=DEFAULT_PART_SIZE // (1024 * 1024),
        help="multipart part size in MiB (>= 5). Default: %(default)s",
    )


def run(args: argparse.Namespace) -> int:
    client = make_s3_client(endpoint_url=args.endpoint_url, region=args.region)
    result = upload_file(args.file, args.bucket, args.key, client=client, part_size=args.part_size_mib * 1024 * 1024)
    print(f"{result.uri}  sha256:{result.sha256}  {result.status}")
    return 0
