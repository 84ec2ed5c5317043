#!/usr/bin/env python3
"""Check that the local provisioning and template.yaml agree.

Provisions the template's tables and queues in moto under a fresh prefix (with
infra/provision.py's own code), then reads back what moto holds and compares every
property the template sets that the local stack depends on: key schema, attribute
types, billing mode, TTL attribute, point-in-time recovery, indexes; FIFO, content
de-duplication, visibility timeout, retention, and the dead-letter redrive (target
and receive count). Exits 1 with one line per disagreement.

    .venv/bin/python infra/check_provisioning.py --endpoint http://127.0.0.1:5005
"""
import argparse
import json
import os
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import provision  # noqa: E402  (re-execs into .venv when boto3 is missing)

import boto3  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"), required=False)
    args = parser.parse_args()
    if not args.endpoint:
        parser.error("pass --endpoint (moto's URL)")
    session = boto3.session.Session(
        aws_access_key_id="check", aws_secret_access_key="check", region_name="us-east-1"
    )
    template = provision.load_template(provision.ROOT / "template.yaml")
    stack = provision.Stack(template, f"check-{uuid.uuid4().hex[:8]}", session, args.endpoint)
    for logical_id in stack.of_type("AWS::SQS::Queue"):
        if logical_id not in stack.created:
            stack.create_queue(logical_id)
    for logical_id in stack.of_type("AWS::DynamoDB::Table"):
        stack.create_table(logical_id)

    problems = []

    def expect(what, wanted, got):
        if wanted != got:
            problems.append(f"{what}: template says {wanted!r}, local stack has {got!r}")

    tables = stack.of_type("AWS::DynamoDB::Table")
    queues = stack.of_type("AWS::SQS::Queue")
    if not tables or not queues:
        problems.append("the template declares no table or no queue")
    for logical_id in tables:
        props = stack.resolve(stack.resources[logical_id]["Properties"])
        name = stack.created[logical_id]["Ref"]
        table = stack.dynamodb.describe_table(TableName=name)["Table"]
        expect(f"{logical_id} key schema", props["KeySchema"], table["KeySchema"])
        expect(
            f"{logical_id} attributes",
            sorted((a["AttributeName"], a["AttributeType"]) for a in props["AttributeDefinitions"]),
            sorted((a["AttributeName"], a["AttributeType"]) for a in table["AttributeDefinitions"]),
        )
        expect(
            f"{logical_id} billing",
            props.get("BillingMode", "PROVISIONED"),
            table.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED"),
        )
        expect(
            f"{logical_id} indexes",
            sorted(i["IndexName"] for i in props.get("GlobalSecondaryIndexes", [])),
            sorted(i["IndexName"] for i in table.get("GlobalSecondaryIndexes", [])),
        )
        ttl = stack.dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        wanted_ttl = props.get("TimeToLiveSpecification", {})
        expect(f"{logical_id} TTL attribute", wanted_ttl.get("AttributeName"), ttl.get("AttributeName"))
        expect(f"{logical_id} TTL status", "ENABLED", ttl.get("TimeToLiveStatus"))
        backups = stack.dynamodb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
        pitr = backups.get("PointInTimeRecoveryDescription", {}).get("PointInTimeRecoveryStatus")
        wanted_pitr = str(props.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled", "false")).lower()
        expect(f"{logical_id} point-in-time recovery", "ENABLED" if wanted_pitr == "true" else "DISABLED", pitr)
    for logical_id in queues:
        props = stack.resolve(stack.resources[logical_id]["Properties"])
        attributes = stack.sqs.get_queue_attributes(
            QueueUrl=stack.created[logical_id]["Ref"], AttributeNames=["All"]
        )["Attributes"]
        for key in ("FifoQueue", "ContentBasedDeduplication", "VisibilityTimeout", "MessageRetentionPeriod", "SqsManagedSseEnabled"):
            if key in props:
                expect(f"{logical_id} {key}", provision._attribute(props[key]).lower(), attributes.get(key, "").lower())
        if "RedrivePolicy" in props:
            redrive = json.loads(attributes.get("RedrivePolicy", "{}"))
            expect(f"{logical_id} dead-letter target", props["RedrivePolicy"]["deadLetterTargetArn"], redrive.get("deadLetterTargetArn"))
            expect(f"{logical_id} maxReceiveCount", int(props["RedrivePolicy"]["maxReceiveCount"]), int(redrive.get("maxReceiveCount", 0)))
    # The functions read the names the template wires into their environment.
    expect("function environment", {"TABLE_NAME", "JOBS_QUEUE_URL", "WHATSAPP_QUEUE_URL", "EVENTS_QUEUE_URL"}, set(stack.environment()))

    for problem in problems:
        print(f"check_provisioning: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_provisioning: {len(tables)} table(s) and {len(queues)} queue(s) match template.yaml")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
