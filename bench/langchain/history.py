"""LangChain's DynamoDBChatMessageHistory, driven turn by turn for the footprint
benchmark (bench/src/footprint), against moto through degrau-awsproxy.

Each turn is one "ask" of an agent that keeps its history in DynamoDB:

  separate  add the user message, add the reply, read the history (three calls of
            the history API, as the benchmark's brief describes an agent's turn);
  runnable  read the history once, then add both messages in one add_messages
            call (what RunnableWithMessageHistory does per invocation).

Modes:

  full      every turn of the conversation is played through the class and
            measured (the history grows as in production; slow on moto, whose
            cost per call grows with the item);
  seeded    (default) only the checkpoint turns are played through the class;
            before each one, the history item is written in one PutItem with the
            messages of all earlier turns, serialised exactly as the class stores
            them (messages_to_dict through the same boto3 Table), so the measured
            turn finds the very item a full run would have built.

Before each measured turn the proxy's log is reset; after it the log is read,
so every output line holds exactly that turn's AWS calls, as the proxy recorded
them (sizes and capacity units per DynamoDB's rules). Output: JSON lines

  {"pattern": ..., "turn": n, "wall_ms": ..., "cpu_ms": ..., "messages": m,
   "error": null | "...", "calls": [...]}

When the history no longer fits DynamoDB's 400 KB item limit, the first turn
whose item cannot be stored is found (in seeded mode by bisection over the
seeded item) and reported with its error; the pattern then stops, since every
later add fails the same way.

usage: history.py --endpoint URL --table NAME --conversation FILE --out FILE
                  [--patterns separate,runnable] [--mode seeded|full]
                  [--checkpoints 10,100,300]
"""

import argparse
import json
import sys
import time
import urllib.request

import boto3
from langchain_community.chat_message_histories import DynamoDBChatMessageHistory
from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict


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


def messages_of(turns):
    messages = []
    for turn in turns:
        messages.append(HumanMessage(content=turn["user"]))
        messages.append(AIMessage(content=turn["assistant"]))
    return messages


def seed(history, session_id, turns):
    """Writes the history item holding `turns`, as the class would have stored it."""
    history.table.put_item(
        Item={"SessionId": session_id, "History": messages_to_dict(messages_of(turns))}
    )


def measure(endpoint, pattern, history, number, turn):
    control(endpoint, "reset", "POST")
    error = None
    messages = None
    wall = time.perf_counter()
    cpu = time.process_time()
    try:
        messages = PATTERNS[pattern](history, turn["user"], turn["assistant"])
    except Exception as exc:  # the benchmark reports it
        error = f"{type(exc).__name__}: {exc}"
    cpu_ms = (time.process_time() - cpu) * 1000.0
    wall_ms = (time.perf_counter() - wall) * 1000.0
    return {
        "pattern": pattern,
        "turn": number,
        "wall_ms": wall_ms,
        "cpu_ms": cpu_ms,
        "messages": messages,
        "error": error,
        "calls": control(endpoint, "log"),
    }


def first_unstorable(history, session_id, turns, low, high):
    """The first turn in (low, high] whose history no longer fits one item, and the
    error storing it: the largest n whose seeded item is accepted, plus one."""
    error = None
    while low < high:
        middle = (low + high + 1) // 2
        try:
            seed(history, session_id, turns[:middle])
            low = middle
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            high = middle - 1
    return low + 1, error


def run_full(args, out, pattern, history, turns):
    for number, turn in enumerate(turns, start=1):
        record = measure(args.endpoint, pattern, history, number, turn)
        out.write(json.dumps(record) + "\n")
        out.flush()
        if record["error"] is not None:
            print(f"langchain {pattern}: turn {number}: {record['error']}", file=sys.stderr)
            return
        if number % 100 == 0:
            print(f"langchain {pattern}: turn {number}", file=sys.stderr)


def run_seeded(args, out, pattern, history, session_id, turns, checkpoints):
    stored = 0  # turns known to fit in the item
    for number in checkpoints:
        if number > len(turns):
            break
        try:
            seed(history, session_id, turns[: number - 1])
            record = measure(args.endpoint, pattern, history, number, turns[number - 1])
        except Exception as exc:
            record = {"error": f"{type(exc).__name__}: {exc}"}
        if record["error"] is None:
            out.write(json.dumps(record) + "\n")
            out.flush()
            stored = number
            print(f"langchain {pattern}: turn {number}", file=sys.stderr)
            continue
        turn, error = first_unstorable(history, session_id, turns, stored, number)
        failed = {
            "pattern": pattern,
            "turn": turn,
            "wall_ms": 0.0,
            "cpu_ms": 0.0,
            "messages": None,
            "error": error or record["error"],
            "calls": [],
        }
        out.write(json.dumps(failed) + "\n")
        print(f"langchain {pattern}: turn {turn}: {failed['error']}", file=sys.stderr)
        return


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--conversation", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--patterns", default="separate,runnable")
    parser.add_argument("--mode", choices=["seeded", "full"], default="seeded")
    parser.add_argument("--checkpoints", default="10,100,300")
    args = parser.parse_args()

    with open(args.conversation, encoding="utf-8") as f:
        turns = json.load(f)["turns"]
    checkpoints = sorted({int(c) for c in args.checkpoints.split(",") if c.strip()})
    create_table(args.endpoint, args.table)
    try:
        with open(args.out, "w", encoding="utf-8") as out:
            play(args, out, turns, checkpoints)
    finally:
        # A shared moto never frees what runs leave behind.
        boto3.client(
            "dynamodb", endpoint_url=args.endpoint, region_name="us-east-1"
        ).delete_table(TableName=args.table)


def play(args, out, turns, checkpoints):
    for pattern in args.patterns.split(","):
        session_id = "footprint-" + pattern
        history = DynamoDBChatMessageHistory(
            table_name=args.table,
            session_id=session_id,
            endpoint_url=args.endpoint,
        )
        if args.mode == "full":
            run_full(args, out, pattern, history, turns)
        else:
            run_seeded(args, out, pattern, history, session_id, turns, checkpoints)


if __name__ == "__main__":
    main()
