#!/usr/bin/env python3
"""Searches the step seeds of a hand-written burst for a failing plan (issue 40).

Some defects need one interleaving the generated seeds reach too rarely to count on
(a window read across an erase and the contact's next life, say). This plays a fixed
scenario, a contact's first life and then a burst of an ask, an erase and recorded
rounds on it, with fresh step seeds each try (the seeds decide every latency, crash
and interleaving inside), until the simulator given fails; the plan is written out,
to keep in sim/regressions/ once it holds on the fixed code.

    python3 sim/search.py BINARY {tool-cut|torn-round|PLAN.json} TRIES OUT.json [SEED]

`tool-cut`: one plain round, then an ask, an erase and a recorded tool round at once
(the ask's window read may cut the next life's tool call from its result).
`torn-round`: one plain round, then an ask and a recorded round at once (the
ask's two reads may meet the recorded round's transaction half landed).
`PLAN.json`: a kept plan's own events, with fresh step seeds (a plan kept before the
world changed its timings may no longer play the interleaving it was kept for).
"""
import json
import random
import subprocess
import sys
import tempfile

CONTACT = 1  # a contact of the tenant with tools (`sim/src/world.rs`)


def scenario(rng, kind):
    plain = {"event": "record", "contact": CONTACT, "tool": False, "chars": 40}
    tool = {"event": "record", "contact": CONTACT, "tool": True, "chars": 40}
    ask = {"event": "ask", "contact": CONTACT, "idempotent": False, "chars": 40}
    erase = {"event": "erase", "contact": CONTACT}
    first_life = [plain]
    burst = [ask, erase, tool] if kind == "tool-cut" else [plain, ask]
    steps = [{"seed": rng.getrandbits(64), "event": event} for event in first_life]
    steps.append({"seed": rng.getrandbits(64), "event": {"event": "together", "ops": burst}})
    return {"seed": 0, "window": 8000, "steps": steps}


def reseeded(rng, kept):
    steps = [{"seed": rng.getrandbits(64), "event": step["event"]} for step in kept["steps"]]
    return {"seed": kept["seed"], "window": kept["window"], "steps": steps}


def main():
    binary, kind, tries, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    kept = None
    if kind.endswith(".json"):
        with open(kind) as f:
            kept = json.load(f)
    elif kind not in ("tool-cut", "torn-round"):
        sys.exit(f"unknown scenario {kind}")
    rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 1)
    with tempfile.TemporaryDirectory() as scratch:
        path = f"{scratch}/plan.json"
        for attempt in range(tries):
            plan = reseeded(rng, kept) if kept else scenario(rng, kind)
            with open(path, "w") as f:
                json.dump(plan, f, indent=2)
            played = subprocess.run(
                [binary, "--replay", path], capture_output=True, text=True, cwd=scratch
            )
            if played.returncode != 0:
                with open(out, "w") as f:
                    json.dump(plan, f, indent=2)
                    f.write("\n")
                print(f"try {attempt + 1} fails; the plan is in {out}")
                print(played.stdout[:2000])
                return
    print(f"no failure in {tries} tries")
    sys.exit(1)


if __name__ == "__main__":
    main()
