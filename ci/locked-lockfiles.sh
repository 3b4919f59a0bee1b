#!/usr/bin/env bash
# Every lock file kiln commits outside the workspace's own (the examples and
# the `cargo kiln new` template) is current: `cargo metadata --locked` fails
# when a build would rewrite it (a dependency added to a kiln crate and not
# to the examples' lock files). Fix: run `cargo metadata` (or any build) in
# the named folder and commit its Cargo.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
failed=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for lock in examples/*/Cargo.lock crates/cargo-kiln/template/Cargo.lock; do
  [[ -f $lock ]] || continue
  dir=$(dirname "$lock")
  if cargo metadata --format-version 1 --locked --manifest-path "$dir/Cargo.toml" >/dev/null 2>"$err"; then
    echo "ok: $lock"
  else
    echo "stale: $lock ($(grep -m1 error: "$err" || true)); run \`cargo metadata\` in $dir and commit its Cargo.lock"
    failed=1
  fi

done
exit $failed
