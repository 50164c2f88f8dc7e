#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 30) on its committed
# corpus. Installs cargo-fuzz for the pinned nightly when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install --locked --quiet cargo-fuzz
fi
for dir in capture-analyzer/fuzz engine/fuzz harness/fuzz; do
    for target in $(cd "$dir" && cargo +nightly fuzz list); do
        echo "fuzz: $dir $target for ${seconds}s" >&2
        mkdir -p "$dir/corpus/$target"
        (cd "$dir" && cargo +nightly fuzz run "$target" "corpus/$target" -- -max_total_time="$seconds")
    done
done
