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

Where the history no longer fits DynamoDB's 400 KB item limit, by DynamoDB's
size rules (degrau-awsproxy's sizes of seeded items, found by bisection), a
record for the first turn DynamoDB would refuse is written, with the turn and
size of the last item that fits ("last_fit"); the pattern then stops, since
every later add fails the same way. moto's own checks differ: its PutItem limit
is 405,000 bytes of its own estimate, and its UpdateItem check counts the
replaced attribute twice, so it refuses the class's updates from about half the
limit on; such a refusal is reported with "moto_artifact": true, not as the
limit.

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


# DynamoDB's item limit, by its own size rules (which degrau-awsproxy applies).
ITEM_LIMIT = 400 * 1024


def seed(endpoint, history, session_id, turns):
    """Writes the history item holding `turns`, as the class would have stored it,
    and returns its size by DynamoDB's rules (from the proxy's log), or None when
    moto refused it."""
    control(endpoint, "reset", "POST")
    try:
        history.table.put_item(
            Item={"SessionId": session_id, "History": messages_to_dict(messages_of(turns))}
        )
    except Exception:
        return None
    puts = [
        c for c in control(endpoint, "log") if c["operation"] == "PutItem" and c["status"] == 200
    ]
    return puts[-1]["bytes_written"] if puts else None


def fits(size):
    return size is not None and size <= ITEM_LIMIT


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


def limit_record(endpoint, pattern, history, session_id, turns, low, high):
    """Finds, by bisection over seeded items, the largest n in [low, high] whose
    history fits DynamoDB's limit, and returns the record of turn n + 1: the first
    one whose write DynamoDB refuses, with the size of the last item that fits."""
    sizes = {}
    while low < high:
        middle = (low + high + 1) // 2
        size = seed(endpoint, history, session_id, turns[:middle])
        if fits(size):
            sizes[middle] = size
            low = middle
        else:
            high = middle - 1
    last = sizes.get(low) or seed(endpoint, history, session_id, turns[:low]) or 0
    over = seed(endpoint, history, session_id, turns[: low + 1])
    over_text = f"{over:,} bytes" if over is not None else "too large for moto to store"
    return {
        "pattern": pattern,
        "turn": low + 1,
        "wall_ms": 0.0,
        "cpu_ms": 0.0,
        "messages": None,
        "error": (
            f"the history item would be {over_text} by DynamoDB's size rules, over its "
            f"400 KB ({ITEM_LIMIT:,} bytes) limit: DynamoDB refuses the write"
        ),
        "calls": [],
        "last_fit": [low, last],
    }


MOTO_UPDATE_CHECK = "Item size to update has exceeded"


def refused_by_moto_only(endpoint, history, session_id, turns, number, record):
    """moto checks an UpdateItem against its limit counting the replaced attribute
    twice (old and new value), so it refuses updates of items past about half the
    limit that DynamoDB accepts. True when that is what happened at turn `number`."""
    if record["error"] is None or MOTO_UPDATE_CHECK not in record["error"]:
        return False
    return fits(seed(endpoint, history, session_id, turns[:number]))


def report_moto_refusal(out, pattern, record):
    record["moto_artifact"] = True
    record["error"] = (
        "moto refused the class's UpdateItem (its check counts the replaced History "
        "twice); DynamoDB accepts this item: " + record["error"]
    )
    out.write(json.dumps(record) + "\n")
    print(f"langchain {pattern}: turn {record['turn']}: {record['error']}", file=sys.stderr)


def run_full(args, out, pattern, history, session_id, turns):
    for number, turn in enumerate(turns, start=1):
        record = measure(args.endpoint, pattern, history, number, turn)
        if record["error"] is None:
            out.write(json.dumps(record) + "\n")
            out.flush()
            if number % 100 == 0:
                print(f"langchain {pattern}: turn {number}", file=sys.stderr)
            continue
        if refused_by_moto_only(args.endpoint, history, session_id, turns, number, record):
            report_moto_refusal(out, pattern, record)
        else:
            out.write(json.dumps(record) + "\n")
            print(f"langchain {pattern}: turn {number}: {record['error']}", file=sys.stderr)
        # No later turn can be played through the class; find where DynamoDB's limit is.
        if not fits(seed(args.endpoint, history, session_id, turns)):
            failed = limit_record(
                args.endpoint, pattern, history, session_id, turns, number - 1, len(turns)
            )
            out.write(json.dumps(failed) + "\n")
            print(f"langchain {pattern}: turn {failed['turn']}: {failed['error']}", file=sys.stderr)
        return


def run_seeded(args, out, pattern, history, session_id, turns, checkpoints):
    stored = 0  # turns known to fit in one item
    for number in checkpoints:
        if number > len(turns):
            break
        if not fits(seed(args.endpoint, history, session_id, turns[:number])):
            failed = limit_record(
                args.endpoint, pattern, history, session_id, turns, stored, number - 1
            )
            out.write(json.dumps(failed) + "\n")
            print(f"langchain {pattern}: turn {failed['turn']}: {failed['error']}", file=sys.stderr)
            return
        stored = number
        seed(args.endpoint, history, session_id, turns[: number - 1])
        record = measure(args.endpoint, pattern, history, number, turns[number - 1])
        if record["error"] is not None and refused_by_moto_only(
            args.endpoint, history, session_id, turns, number, record
        ):
            report_moto_refusal(out, pattern, record)
            continue
        out.write(json.dumps(record) + "\n")
        out.flush()
        print(f"langchain {pattern}: turn {number}", file=sys.stderr)


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
            run_full(args, out, pattern, history, session_id, turns)
        else:
            run_seeded(args, out, pattern, history, session_id, turns, checkpoints)


if __name__ == "__main__":
    main()
