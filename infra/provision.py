#!/usr/bin/env python3
"""Create the local stack's DynamoDB tables and SQS queues in moto from template.yaml.

The template is the single source: every AWS::DynamoDB::Table and AWS::SQS::Queue it
declares is created (key schema, billing mode, global secondary indexes, TTL,
point-in-time recovery; FIFO attributes, visibility timeout, retention, dead-letter
redrive), named `{prefix}-{logical-id-in-kebab-case}` (`.fifo` for FIFO queues).
Idempotent: what exists is reused and its attributes brought in line (a missing
index is added).

Prints, for each function environment variable of the template that references one
of those resources (TABLE_NAME, JOBS_QUEUE_URL, WHATSAPP_QUEUE_URL, EVENTS_QUEUE_URL), a `NAME=value` line on stdout:

    eval "$(.venv/bin/python infra/provision.py --endpoint http://127.0.0.1:5005)"
    export TABLE_NAME JOBS_QUEUE_URL

boto3 and PyYAML come from the repo's .venv (infra/setup.sh); run by another python3,
the script hands itself over to .venv/bin/python.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"

try:
    import boto3
    import yaml
    from botocore.exceptions import ClientError
except ImportError:
    # Run by a python3 without the tools: hand over to the repo's .venv (setup.sh).
    if VENV_PYTHON.exists() and Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), __file__, *sys.argv[1:]])
    sys.exit("provision: boto3 and PyYAML are missing; run 'bash infra/setup.sh' first")


class TemplateLoader(yaml.SafeLoader):
    """A YAML loader that reads CloudFormation short tags (!Ref, !GetAtt, !Sub, ...)
    as their long forms ({"Ref": ...}, {"Fn::GetAtt": [...]}, ...)."""


def _short_tag(loader: TemplateLoader, suffix: str, node: yaml.Node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


TemplateLoader.add_multi_constructor("!", _short_tag)


def load_template(path: Path) -> dict:
    with path.open(encoding="utf-8") as file:
        return yaml.load(file, Loader=TemplateLoader)  # noqa: S506 (a SafeLoader subclass)


def kebab(logical_id: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", logical_id).lower()


def log(message: str) -> None:
    print(f"provision: {message}", file=sys.stderr)


# What `!Ref AWS::NoValue` resolves to: the property holding it is left out.
NO_VALUE = object()


class Stack:
    """The template's tables and queues, created in one account (moto)."""

    def __init__(self, template: dict, prefix: str, session: boto3.session.Session, endpoint: str):
        self.resources: dict = template.get("Resources", {})
        self.parameters: dict = template.get("Parameters", {})
        self.conditions: dict = template.get("Conditions", {})
        self.globals: dict = template.get("Globals", {})
        self.prefix = prefix
        self.dynamodb = session.client("dynamodb", endpoint_url=endpoint)
        self.sqs = session.client("sqs", endpoint_url=endpoint)
        # Logical id -> {"Ref": ..., "Arn": ..., "QueueName": ...}
        self.created: dict[str, dict[str, str]] = {}

    def of_type(self, kind: str) -> list[str]:
        return [lid for lid, res in self.resources.items() if res.get("Type") == kind]

    def condition(self, name: str) -> bool:
        """Evaluates a template condition with the parameters' defaults."""
        return self.truth(self.conditions[name])

    def truth(self, value) -> bool:
        (key, arg), = value.items()
        if key == "Condition":
            return self.condition(arg)
        if key == "Fn::Equals":
            left, right = (str(self.resolve(v)) for v in arg)
            return left == right
        if key == "Fn::Not":
            return not self.truth(arg[0])
        if key == "Fn::And":
            return all(self.truth(v) for v in arg)
        if key == "Fn::Or":
            return any(self.truth(v) for v in arg)
        raise KeyError(f"cannot evaluate the condition {key}")

    def resolve(self, value):
        """Resolves Ref/GetAtt to created resources and parameter defaults, and Fn::If
        by its condition; a property that resolves to AWS::NoValue is left out."""
        if isinstance(value, dict) and len(value) == 1:
            (key, arg), = value.items()
            if key == "Fn::If":
                name, yes, no = arg
                return self.resolve(yes if self.condition(name) else no)
            if key == "Ref" and arg == "AWS::NoValue":
                return NO_VALUE
            if key == "Ref":
                if arg in self.created:
                    return self.created[arg]["Ref"]
                if arg in self.parameters and "Default" in self.parameters[arg]:
                    return self.parameters[arg]["Default"]
                raise KeyError(f"cannot resolve !Ref {arg}")
            if key == "Fn::GetAtt":
                logical_id, attribute = arg
                if logical_id not in self.created:
                    raise KeyError(f"cannot resolve !GetAtt {logical_id}.{attribute} (not created yet)")
                return self.created[logical_id][attribute]
        if isinstance(value, dict):
            resolved = {k: self.resolve(v) for k, v in value.items()}
            return {k: v for k, v in resolved.items() if v is not NO_VALUE}
        if isinstance(value, list):
            return [v for v in (self.resolve(v) for v in value) if v is not NO_VALUE]
        return value

    # ---- DynamoDB ----------------------------------------------------------------

    def create_table(self, logical_id: str) -> None:
        props = self.resolve(self.resources[logical_id].get("Properties", {}))
        name = f"{self.prefix}-{kebab(logical_id)}"
        try:
            description = self.dynamodb.describe_table(TableName=name)["Table"]
            log(f"table {name} exists, reusing it")
            self.add_missing_indexes(name, props, description)
        except ClientError as err:
            if err.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
            args = {
                "TableName": name,
                "KeySchema": props["KeySchema"],
                "AttributeDefinitions": props["AttributeDefinitions"],
                "BillingMode": props.get("BillingMode", "PROVISIONED"),
            }
            if args["BillingMode"] == "PROVISIONED":
                args["ProvisionedThroughput"] = props["ProvisionedThroughput"]
            for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
                if key in props:
                    args[key] = props[key]
            description = self.dynamodb.create_table(**args)["TableDescription"]
            self.dynamodb.get_waiter("table_exists").wait(
                TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30}
            )
            log(f"table {name} created")
        ttl = props.get("TimeToLiveSpecification")
        if ttl and str(ttl.get("Enabled", "false")).lower() == "true":
            current = self.dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
            if current.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
                self.dynamodb.update_time_to_live(
                    TableName=name,
                    TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
                )
        pitr = props.get("PointInTimeRecoverySpecification", {})
        if str(pitr.get("PointInTimeRecoveryEnabled", "false")).lower() == "true":
            self.dynamodb.update_continuous_backups(
                TableName=name,
                PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
            )
        self.created[logical_id] = {"Ref": name, "Arn": description["TableArn"]}

    def add_missing_indexes(self, name: str, props: dict, description: dict) -> None:
        """Creates the template's global secondary indexes a reused table lacks (a
        local table made before the index was added), one update each."""
        existing = {i["IndexName"] for i in description.get("GlobalSecondaryIndexes", [])}
        definitions = {a["AttributeName"]: a for a in props["AttributeDefinitions"]}
        # Every key attribute of the table and of its indexes once this one exists:
        # moto replaces the table's definitions with these, DynamoDB merges them.
        keys = {k["AttributeName"] for k in props["KeySchema"]}
        for index in props.get("GlobalSecondaryIndexes", []):
            if index["IndexName"] in existing:
                keys |= {k["AttributeName"] for k in index["KeySchema"]}
        for index in props.get("GlobalSecondaryIndexes", []):
            if index["IndexName"] in existing:
                continue
            keys |= {k["AttributeName"] for k in index["KeySchema"]}
            self.dynamodb.update_table(
                TableName=name,
                AttributeDefinitions=[definitions[k] for k in sorted(keys)],
                GlobalSecondaryIndexUpdates=[{"Create": index}],
            )
            existing.add(index["IndexName"])
            log(f"table {name}: index {index['IndexName']} added")

    # ---- SQS -----------------------------------------------------------------------

    QUEUE_ATTRIBUTES = (
        "SqsManagedSseEnabled",
        "KmsMasterKeyId",
        "KmsDataKeyReusePeriodSeconds",
        "ContentBasedDeduplication",
        "DeduplicationScope",
        "FifoThroughputLimit",
        "VisibilityTimeout",
        "MessageRetentionPeriod",
        "DelaySeconds",
        "MaximumMessageSize",
        "ReceiveMessageWaitTimeSeconds",
    )

    def queue_dependencies(self, logical_id: str) -> list[str]:
        redrive = self.resources[logical_id].get("Properties", {}).get("RedrivePolicy", {})
        target = redrive.get("deadLetterTargetArn") if isinstance(redrive, dict) else None
        if isinstance(target, dict) and "Fn::GetAtt" in target:
            return [target["Fn::GetAtt"][0]]
        return []

    def create_queue(self, logical_id: str) -> None:
        for dependency in self.queue_dependencies(logical_id):
            if dependency not in self.created:
                self.create_queue(dependency)
        props = self.resolve(self.resources[logical_id].get("Properties", {}))
        fifo = str(props.get("FifoQueue", "false")).lower() == "true"
        name = f"{self.prefix}-{kebab(logical_id)}" + (".fifo" if fifo else "")
        attributes = {key: _attribute(props[key]) for key in self.QUEUE_ATTRIBUTES if key in props}
        if "RedrivePolicy" in props:
            redrive = props["RedrivePolicy"]
            attributes["RedrivePolicy"] = json.dumps(
                {
                    "deadLetterTargetArn": redrive["deadLetterTargetArn"],
                    "maxReceiveCount": int(redrive["maxReceiveCount"]),
                }
            )
        try:
            url = self.sqs.get_queue_url(QueueName=name)["QueueUrl"]
            if attributes:
                self.sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
            log(f"queue {name} exists, reusing it")
        except ClientError as err:
            if err.response["Error"]["Code"] not in (
                "AWS.SimpleQueueService.NonExistentQueue",
                "QueueDoesNotExist",
            ):
                raise
            create = dict(attributes)
            if fifo:
                create["FifoQueue"] = "true"
            url = self.sqs.create_queue(QueueName=name, Attributes=create)["QueueUrl"]
            log(f"queue {name} created")
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.created[logical_id] = {"Ref": url, "Arn": arn, "QueueName": name}

    # ---- outputs -------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        """The template's function environment variables that name a created resource."""
        sources = [self.globals.get("Function", {})] + [
            res.get("Properties", {})
            for res in self.resources.values()
            if res.get("Type") in ("AWS::Serverless::Function", "AWS::Lambda::Function")
        ]
        found: dict[str, str] = {}
        for props in sources:
            variables = props.get("Environment", {}).get("Variables", {})
            for name, value in variables.items():
                ref = value.get("Ref") if isinstance(value, dict) else None
                if ref in self.created:
                    found[name] = self.created[ref]["Ref"]
        return found


def _attribute(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--endpoint",
        default=os.environ.get("AWS_ENDPOINT_URL"),
        help="moto's URL (default: $AWS_ENDPOINT_URL)",
    )
    parser.add_argument("--prefix", default="degrau-local", help="resource name prefix")
    parser.add_argument(
        "--template", type=Path, default=ROOT / "template.yaml", help="the SAM template"
    )
    args = parser.parse_args()
    if not args.endpoint:
        parser.error("no endpoint: pass --endpoint or set AWS_ENDPOINT_URL (see infra/moto.sh url)")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", args.prefix):
        parser.error("--prefix may hold 1-40 of A-Z a-z 0-9 _ . -")

    template = load_template(args.template)
    session = boto3.session.Session(
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "degrau-local"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "degrau-local"),
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
    )
    stack = Stack(template, args.prefix, session, args.endpoint)
    for logical_id in stack.of_type("AWS::DynamoDB::Table"):
        stack.create_table(logical_id)
    for logical_id in stack.of_type("AWS::SQS::Queue"):
        if logical_id not in stack.created:
            stack.create_queue(logical_id)
    for name, value in sorted(stack.environment().items()):
        print(f"{name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
