#!/usr/bin/env bash
# Usage: scripts/fuzz.sh [SECONDS] [--dev]
# Runs every cargo-fuzz target for SECONDS each (default 30) on its committed
# corpus (CI: 10 s each; longer on demand); new inputs land in
# target/fuzz/found/, never in the committed corpus. Installs cargo-fuzz for the
# nightly when missing. The three fuzz crates share one target directory,
# so the engine and the analyzer are built once for all of them, and the
# XDP object comes from the workspace's BPF build (target/bpf, see
# bpf-objects/build.rs) instead of a build of its own.
# --dev builds without optimisation: for the test command's 10 s a target,
# where the release build took three of its four minutes (measured here:
# the engine's targets build in 65 s instead of 116 s, and the session
# target still runs ~3,400 inputs a second). Long runs want release.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
profile=()
if [ "${2:-}" = "--dev" ]; then
    profile=(--dev)
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    # The version known to work with this repository's toolchains.
    cargo install --locked --quiet --version 0.13.2 cargo-fuzz
fi
target_dir="$PWD/target/fuzz"
failed=0
for dir in engine/fuzz capture-analyzer/fuzz harness/fuzz; do
    for target in $(cd "$dir" && cargo +nightly fuzz list); do
        echo "fuzz: $dir $target for ${seconds}s" >&2
        mkdir -p "$dir/corpus/$target"
        # libFuzzer writes what it finds into its first corpus directory:
        # a scratch one, so the committed corpus changes only by choice.
        found="$target_dir/found/${dir%%/*}/$target"
        mkdir -p "$found"
        # One line per target in libtest's words, counted by
        # scripts/outcomes.sh; a crash fails the target, not the loop.
        if (cd "$dir" && cargo +nightly fuzz run "${profile[@]}" --target-dir "$target_dir" "$target" "$found" "corpus/$target" -- -max_total_time="$seconds"); then
            echo "fuzz ${dir%%/*} $target ... ok"
        else
            echo "fuzz ${dir%%/*} $target ... FAILED"
            failed=1
        fi
    done
done
exit "$failed"
