#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test,
# privileged ones included (as root they create and remove their own lab),
# and every fuzz target briefly on its committed corpus. Ends with one line,
# `N passed, N failed, N inconclusive`, and exits non-zero when anything
# failed. Extra arguments go to `cargo test` (e.g. `--test run`); with them
# the fuzz step is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Fail instead of skipping when eBPF or root is missing: CI must test the
# real thing, and a skipped test is not a passed one.
export LINECARD_REQUIRE_EBPF=1 LINECARD_REQUIRE_PRIVILEGED=1
# A test whose measurement was not taken (the hypervisor kept it from
# measuring) records it here and is counted inconclusive, never passed
# (harness/tests/common.rs, `inconclusive`).
mkdir -p target
export LINECARD_INCONCLUSIVE_LOG="$PWD/target/inconclusive.log"
log="$PWD/target/test-output.log"
rm -f "$LINECARD_INCONCLUSIVE_LOG" "$log"
# The privileged tests share one lab and leave it up for the next; take it
# down however they end (the project's own teardown: lc-* namespaces,
# cpusets, the root cpuset's load balancing).
trap 'target/debug/linecard lab down >/dev/null 2>&1 || echo "linecard lab down failed" >&2' EXIT
status=0
{
    # Lints first (workspace [lints], clippy.toml): seconds, counted as
    # one outcome, so a warning fails the command like a test.
    if cargo clippy --locked --all-targets -- -D warnings; then
        echo "lint clippy workspace ... ok"
    else
        echo "lint clippy workspace ... FAILED"
    fi
    # The second build `linecard compare`'s test runs against this one:
    # this linecardd with a deliberate regression compiled in (cargo holds
    # its build directory while tests run, so the test cannot build it).
    # Only the engine recompiles; the plain build after it is this one's.
    cargo build --locked -p linecard-engine --bin linecardd --features regress-xdp-replies &&
        mkdir -p target/regressed && cp target/debug/linecardd target/regressed/linecardd &&
        # The privileged tests run the real binaries (linecardd among them).
        cargo build --locked --bins &&
        # Every test binary runs even after a failure, so one run shows
        # everything. Default members; xdp/ is built by bpf-objects.
        cargo test --locked --no-fail-fast "$@"
} 2>&1 | tee "$log" || status=$?
if (($# == 0)); then
    bash scripts/fuzz.sh "${LINECARD_FUZZ_SECONDS:-2}" --dev 2>&1 | tee -a "$log" || status=$((status ? status : $?))
fi
target/debug/linecard lab down >/dev/null 2>&1 || echo "linecard lab down failed" >&2
trap - EXIT
echo "==== outcomes (target/test-output.log) ===="
bash scripts/outcomes.sh "$log" "$LINECARD_INCONCLUSIVE_LOG" "$status"
