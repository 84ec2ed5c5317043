#!/usr/bin/env bash
# Each regression plan fails on the code before its fix (issue 40). For every plan
# of sim/regressions/ named in sim/regressions/FIXES, in a scratch worktree under
# /tmp (removed at the end): the tree of the commit that kept the plan (so the
# simulator and its plan format are the plan's own), with the product's code
# (shared/, adapters/) put back as it was before the fix (the parent of the
# fix's commit, the same commit unless FIXES names another third); the simulator is built and
# the plan replayed. It must break an invariant there, and hold on HEAD (which
# `cargo test` checks). A plan whose simulator does not build against the older
# product is reported as such, not counted.
#
#   bash sim/regressions.sh                 # every plan of FIXES
#   bash sim/regressions.sh erase           # the plans whose name holds a word
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=${REGRESSIONS_TARGET:-/tmp/degrau-regressions-target}
scratch=$(mktemp -d /tmp/degrau-regressions.XXXXXX)
cleanup() {
  git -C "$root" worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT
failed=0
checked=0
unbuilt=0
while read -r plan fix before <&3; do
  case "$plan" in '' | '#'*) continue ;; esac
  # A plan kept after its fix (the simulator came later) names the fix third.
  before=${before:-$fix}
  if [ $# -gt 0 ] && [[ "$plan" != *"$1"* ]]; then continue; fi
  git -C "$root" worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true
  git -C "$root" worktree add --quiet --detach "$scratch/tree" "$fix"
  git -C "$scratch/tree" checkout --quiet "$before^" -- shared adapters
  if ! CARGO_TARGET_DIR=$target cargo build --release --quiet \
      --manifest-path "$scratch/tree/Cargo.toml" -p degrau-sim --bin simulate \
      2>"$scratch/build"; then
    unbuilt=$((unbuilt + 1))
    echo "$plan: the simulator of $fix does not build against $before^'s product (not counted)"
    continue
  fi
  checked=$((checked + 1))
  kept=$scratch/tree/sim/regressions/$plan
  [ -f "$kept" ] || kept=$root/sim/regressions/$plan
  if (cd "$scratch" && "$target/release/simulate" --replay "$kept" >"$scratch/out" 2>&1); then
    failed=$((failed + 1))
    echo "$plan: HOLDS before its fix $before (it should break an invariant)"
  else
    echo "$plan: breaks before its fix $before: $(grep -m1 'broken after event' "$scratch/out" \
      | sed 's/.*broken after event [0-9]*: \([^:]*\):.*/\1/')"
  fi
done 3<sim/regressions/FIXES
echo "$((checked - failed)) of $checked plans break before their fix ($unbuilt not built)"
[ "$failed" -eq 0 ]
