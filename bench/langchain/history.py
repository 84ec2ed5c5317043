"""LangChain's DynamoDBChatMessageHistory, driven turn by turn for the footprint
benchmark (bench/src/footprint), against moto through degrau-awsproxy.

Each turn is one "ask" of an agent that keeps its history in DynamoDB:

  separate  add the user message, add the reply, read the history (three calls of
            the history API, as the benchmark's brief describes an agent's turn);
  runnable  read the history once, then add both messages in one add_messages
            call (what RunnableWithMessageHistory does per invocation).

Before each turn the proxy's log is reset; after it the log is read, so every
line of the output holds exactly that turn's AWS calls, as the proxy recorded
them (sizes and capacity units per DynamoDB's rules). Output: JSON lines

  {"pattern": ..., "turn": n, "wall_ms": ..., "cpu_ms": ..., "messages": m,
   "error": null | "...", "calls": [...]}

A turn that fails (DynamoDB refuses an item over 400 KB) is reported with its
error; the pattern then stops, since every later add would fail the same way.

usage: history.py --endpoint URL --table NAME --conversation FILE --out FILE
                  [--patterns separate,runnable]
"""

import argparse
import json
import sys
import time
import urllib.request

import boto3
from langchain_community.chat_message_histories import DynamoDBChatMessageHistory
from langchain_core.messages import AIMessage, HumanMessage


def control(endpoint, path, method="GET"):
    request = urllib.request.Request(endpoint + "/proxy/" + path, method=method)
    if method == "POST":
        request.data = b"{}"
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read() or b"null")


def create_table(endpoint, table):
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    # The table the class's docs ask for: partition key SessionId, on demand.
    client.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "SessionId", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "SessionId", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.get_waiter("table_exists").wait(TableName=table)


def turn_separate(history, user, reply):
    history.add_user_message(user)
    history.add_ai_message(reply)
    return len(history.messages)


def turn_runnable(history, user, reply):
    before = history.messages  # what the model would be sent
    history.add_messages([HumanMessage(content=user), AIMessage(content=reply)])
    return len(before) + 2


PATTERNS = {"separate": turn_separate, "runnable": turn_runnable}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--conversation", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--patterns", default="separate,runnable")
    args = parser.parse_args()

    with open(args.conversation, encoding="utf-8") as f:
        turns = json.load(f)["turns"]
    create_table(args.endpoint, args.table)
    with open(args.out, "w", encoding="utf-8") as out:
        for pattern in args.patterns.split(","):
            step = PATTERNS[pattern]
            history = DynamoDBChatMessageHistory(
                table_name=args.table,
                session_id="footprint-" + pattern,
                endpoint_url=args.endpoint,
            )
            for number, turn in enumerate(turns, start=1):
                control(args.endpoint, "reset", "POST")
                error = None
                messages = None
                wall = time.perf_counter()
                cpu = time.process_time()
                try:
                    messages = step(history, turn["user"], turn["assistant"])
                except Exception as exc:  # the benchmark reports it
                    error = f"{type(exc).__name__}: {exc}"
                cpu_ms = (time.process_time() - cpu) * 1000.0
                wall_ms = (time.perf_counter() - wall) * 1000.0
                record = {
                    "pattern": pattern,
                    "turn": number,
                    "wall_ms": wall_ms,
                    "cpu_ms": cpu_ms,
                    "messages": messages,
                    "error": error,
                    "calls": control(args.endpoint, "log"),
                }
                out.write(json.dumps(record) + "\n")
                out.flush()
                if error is not None:
                    print(f"langchain {pattern}: turn {number}: {error}", file=sys.stderr)
                    break
                if number % 100 == 0:
                    print(f"langchain {pattern}: turn {number}", file=sys.stderr)


if __name__ == "__main__":
    main()
