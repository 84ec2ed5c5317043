#!/usr/bin/env python3
"""A Python peer of degrau's functions, for the footprint benchmark's cold starts
(bench/src/footprint/python_peer.rs).

It does at init what `ask` and `compactor` do: a DynamoDB and an SQS client
(boto3), an HTTP client for the model (httpx), and the API key read from one SSM
SecureString (ANTHROPIC_API_KEY_PARAMETER). Then it runs the loop the real
Python bootstrap runs: poll the Runtime API's `invocation/next`, answer, poll
again. The benchmark times it the way it times the Rust functions: from process
start to its first poll.

The answer is a fixed one: the invocation only lets the benchmark read the
process's memory after one event; it does none of ask's work.
"""

import json
import os
import urllib.request

import boto3
import httpx

# Init, as the functions do it: clients built once, the secret read once.
session = boto3.session.Session()
dynamodb = session.client("dynamodb")
sqs = session.client("sqs")
ssm = session.client("ssm")
parameter = ssm.get_parameter(
    Name=os.environ["ANTHROPIC_API_KEY_PARAMETER"], WithDecryption=True
)
model = httpx.Client(
    base_url=os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
    headers={
        "x-api-key": parameter["Parameter"]["Value"],
        "anthropic-version": "2023-06-01",
    },
    timeout=60.0,
)
table_name = os.environ["TABLE_NAME"]
queue_url = os.environ.get("JOBS_QUEUE_URL")

runtime = "http://" + os.environ["AWS_LAMBDA_RUNTIME_API"] + "/2018-06-01/runtime"
while True:
    with urllib.request.urlopen(runtime + "/invocation/next") as event:
        request_id = event.headers["Lambda-Runtime-Aws-Request-Id"]
        json.loads(event.read() or b"null")
    answer = json.dumps({"statusCode": 200, "body": "python peer"}).encode()
    urllib.request.urlopen(
        urllib.request.Request(
            runtime + "/invocation/" + request_id + "/response",
            data=answer,
            method="POST",
        )
    ).close()
