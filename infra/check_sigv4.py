"""Recomputes the SigV4 signature of a request the offline stand-in logged, with
botocore's own signer (an implementation independent of the Rust SDK's), and says
whether the request's Authorization header is the one botocore writes.

Reads one JSON object on stdin: {"request": <the stand-in's `signed` log entry:
method, path, query, headers, body>, "access_key", "secret_key", "region",
"service"}. Prints a JSON verdict; exits 0 only when the header matches.
"""

import datetime
import hashlib
import json
import sys
from unittest import mock

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def main():
    given = json.load(sys.stdin)
    logged = given["request"]
    headers = logged["headers"]
    authorization = headers["authorization"]
    # "AWS4-HMAC-SHA256 Credential=.., SignedHeaders=a;b;c, Signature=.."
    parts = dict(
        part.strip().split("=", 1)
        for part in authorization[len("AWS4-HMAC-SHA256 "):].split(",")
    )
    signed = parts["SignedHeaders"].split(";")
    body = logged["body"].encode("utf-8")
    url = f"http://{headers['host']}{logged['path']}"
    if logged.get("query"):
        url += "?" + logged["query"]
    request = AWSRequest(
        method=logged["method"],
        url=url,
        data=body,
        headers={name: headers[name] for name in signed if name != "host"},
    )
    when = datetime.datetime.strptime(headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
    signer = botocore.auth.SigV4Auth(
        Credentials(given["access_key"], given["secret_key"]),
        given["service"],
        given["region"],
    )
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=when):
        signer.add_auth(request)
    recomputed = request.headers["Authorization"]
    content_sha = headers.get("x-amz-content-sha256")
    verdict = {
        "match": recomputed == authorization,
        "recomputed": recomputed,
        "logged": authorization,
        "signed_headers": signed,
        # When the SDK sends the payload hash, it must be the body's.
        "payload_hash_ok": content_sha in (None, hashlib.sha256(body).hexdigest()),
    }
    print(json.dumps(verdict))
    sys.exit(0 if verdict["match"] and verdict["payload_hash_ok"] else 1)


if __name__ == "__main__":
    main()
