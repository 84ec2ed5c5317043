#!/usr/bin/env bash
# The simulator's mutation check (issue 40): each patch in sim/mutants/ undoes one
# defect fix; the simulator must catch every one. For each, in a scratch worktree
# of HEAD under /tmp (removed at the end), the patch is applied, the simulator
# built, and the mutant played: first the generated seeds CI plays (the first
# $SEEDS, default 300), then, if those hold, the plans of sim/regressions/. It
# prints what caught each mutant (the invariant named by the first failure) and
# the mutation score (a mutant sim/mutants/EQUIVALENT names, not caught, is left
# out of it: no state the product writes reaches it, as the test named there shows).
#
#   bash sim/mutants.sh                 # every mutant
#   SEEDS=2500 bash sim/mutants.sh      # as many seeds as ./dev.sh test plays
#   bash sim/mutants.sh late-commit     # the mutants whose name holds a word
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seeds=${SEEDS:-300}
target=${MUTANTS_TARGET:-/tmp/degrau-mutants-target}
scratch=$(mktemp -d /tmp/degrau-mutants.XXXXXX)
cleanup() {
  git -C "$root" worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT
git worktree add --quiet --detach "$scratch/tree" HEAD
tree=$scratch/tree
bin=$target/release/simulate
caught=0
total=0
equivalent=0
# A mutant sim/mutants/EQUIVALENT names: the test that shows no state reaches it.
why_equivalent() { sed -n "s/^$1 //p" "$tree/sim/mutants/EQUIVALENT" 2>/dev/null; }
# The first failure's invariant: the words before the second colon of
# "seed N failed at event K: INVARIANT: detail" or "... broken after event K: INVARIANT: detail".
invariant() { sed -n '1s/^[^:]*: \([^:]*\):.*/\1/p' "$1"; }
for patch in "$tree"/sim/mutants/*.patch; do
  name=$(basename "$patch" .patch)
  if [ $# -gt 0 ] && [[ "$name" != *"$1"* ]]; then continue; fi
  total=$((total + 1))
  git -C "$tree" checkout --quiet -- .
  git -C "$tree" apply "$patch"
  if ! CARGO_TARGET_DIR=$target cargo build --release --quiet --manifest-path "$tree/Cargo.toml" \
      -p degrau-sim --bin simulate 2>"$scratch/build"; then
    echo "$name: the mutant does not build (not counted as caught)"
    tail -5 "$scratch/build"
    continue
  fi
  how=""
  if ! (cd "$scratch" && "$bin" --seeds "$seeds" >"$scratch/out" 2>&1); then
    how="by the seeds ($(grep -m1 -o '^seed [0-9]*' "$scratch/out")): $(grep -m1 'failed at event' "$scratch/out" | sed 's/^[^:]*: \([^:]*\):.*/\1/')"
  else
    for plan in "$tree"/sim/regressions/*.json; do
      if ! (cd "$scratch" && "$bin" --replay "$plan" >"$scratch/out" 2>&1); then
        how="by the plan $(basename "$plan"): $(invariant "$scratch/out")"
        break
      fi
    done
  fi
  if [ -n "$how" ]; then
    caught=$((caught + 1))
    echo "$name: caught $how"
  elif [ -n "$(why_equivalent "$name")" ]; then
    equivalent=$((equivalent + 1))
    echo "$name: not caught, equivalent (no reachable state; shown by $(why_equivalent "$name"))"
  else
    echo "$name: NOT caught"
  fi
done
git -C "$tree" checkout --quiet -- .
echo "mutation score: $caught of $((total - equivalent)) mutants caught ($seeds seeds, then sim/regressions/; $equivalent equivalent, not counted)"
[ "$caught" -eq "$((total - equivalent))" ]
