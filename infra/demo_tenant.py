"""Configures the local stack's demo tenant to use the example tool server.

Writes the webhook's signing secret (from the environment variable named by
--secret-env, never an argument) into moto's SSM as a SecureString, and the demo
tenant's CONFIG item into the table, its tools being webhooks to --tools-url: the
same `list_free_slots` and `book_slot` the built-in demo offers, now answered by
infra/toolserver.py. http://127.0.0.1 is allowed because the local stack runs with
AUTH_MODE=dev; a deployment needs https.

boto3 comes from the repo's .venv (infra/setup.sh).
"""

import argparse
import json
import os
import secrets
import sys

import boto3

# The local stack's WEBHOOK_SECRETS_PATH: a tenant's secrets lie under
# {path}{tenant}/, and degrau refuses any other secret_parameter.
SECRETS_PATH = "/degrau/local/webhooks/"
# The local stack's PSEUDONYM_KEY_PARAMETER (outside the secrets path).
PSEUDONYM_KEY_PARAMETER = "/degrau/local/pseudonym-key"


def parameter(tenant: str) -> str:
    """The SSM parameter holding the tenant's signing secret."""
    return f"{SECRETS_PATH}{tenant}/toolserver"


def tools(url: str, tenant: str) -> list:
    webhook = {"url": url, "secret_parameter": parameter(tenant), "timeout_ms": 5000}
    return [
        {
            "name": "list_free_slots",
            "description": "List the free 30-minute slots of one day, for every professional.",
            "input_schema": {
                "type": "object",
                "properties": {"day": {"type": "string", "description": "Day as YYYY-MM-DD"}},
                "required": ["day"],
            },
            "webhook": webhook,
        },
        {
            "name": "book_slot",
            "description": "Book a free slot. Returns a confirmation id the customer can quote later.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "day": {"type": "string", "description": "Day as YYYY-MM-DD"},
                    "time": {"type": "string", "description": "Start time as HH:MM"},
                    "service": {"type": "string"},
                    "professional": {"type": "string"},
                },
                "required": ["day", "time", "service"],
            },
            "webhook": webhook,
        },
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True, help="moto's URL")
    parser.add_argument("--table", required=True)
    parser.add_argument("--tenant", default="demo-barbershop")
    parser.add_argument("--tools-url", required=True)
    parser.add_argument("--secret-env", default="DEGRAU_TOOLSERVER_SECRET")
    args = parser.parse_args()
    secret = os.environ.get(args.secret_env, "")
    if not secret:
        sys.exit(f"demo_tenant: {args.secret_env} is not set")
    session = boto3.session.Session(
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "local"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "local"),
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
    )
    ssm = session.client("ssm", endpoint_url=args.endpoint)
    ssm.put_parameter(
        Name=parameter(args.tenant), Value=secret, Type="SecureString", Overwrite=True
    )
    # The deployment's pseudonym secret: made once, kept across restarts so that a
    # receiver's pseudonyms stay stable.
    try:
        ssm.put_parameter(
            Name=PSEUDONYM_KEY_PARAMETER,
            Value=secrets.token_hex(32),
            Type="SecureString",
            Overwrite=False,
        )
    except ssm.exceptions.ParameterAlreadyExists:
        pass
    session.client("dynamodb", endpoint_url=args.endpoint).put_item(
        TableName=args.table,
        Item={
            "pk": {"S": f"T#{args.tenant}"},
            "sk": {"S": "CONFIG"},
            "config": {"S": json.dumps({"tools": tools(args.tools_url, args.tenant)})},
        },
    )
    print(f"demo_tenant: {args.tenant} calls its tools at {args.tools_url}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
