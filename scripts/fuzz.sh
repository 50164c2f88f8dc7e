#!/usr/bin/env bash
# Usage: scripts/fuzz.sh [SECONDS] [--dev] | scripts/fuzz.sh --build-only
# Runs every cargo-fuzz target for SECONDS each (default 30) on its committed
# corpus (the test command: 1 s each; longer on demand); new inputs land in
# target/fuzz/found/, never in the committed corpus. Installs cargo-fuzz for the
# nightly when missing. The three fuzz crates share one target directory,
# so the engine and the analyzer are built once for all of them, and the
# XDP object comes from the workspace's BPF build (target/bpf, see
# bpf-objects/build.rs) instead of a build of its own.
# --dev builds without optimisation and without AddressSanitizer: for the
# test command's brief replay of each corpus, where the builds are most of
# the stage (measured here: the engine's targets build in 65 s instead of
# 116 s unoptimised, 72 s instead of 85 s without ASan, and the session
# target still runs ~3,400 inputs a second). Debug assertions stay on, so
# an overflow still fails a target; the fuzzed code is safe Rust, where
# ASan has little to find. Long runs want release, with ASan.
set -euo pipefail
cd "$(dirname "$0")/.."
# --build-only builds every target as the test command's run will
# (--dev) and runs none: the test command starts it in the background,
# away from the DUT's CPU, while the lab tests run (see scripts/test.sh).
build_only=false
if [ "${1:-}" = "--build-only" ]; then
    build_only=true
    set -- 0 --dev
fi
seconds=${1:-30}
profile=()
if [ "${2:-}" = "--dev" ]; then
    profile=(--dev --sanitizer none)
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    # The version known to work with this repository's toolchains.
    cargo install --locked --quiet --version 0.13.2 cargo-fuzz
fi
target_dir="$PWD/target/fuzz"
failed=0
for dir in engine/fuzz capture-analyzer/fuzz harness/fuzz; do
    if $build_only; then
        (cd "$dir" && cargo +nightly fuzz build "${profile[@]}" --target-dir "$target_dir") || failed=1
        continue
    fi
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
