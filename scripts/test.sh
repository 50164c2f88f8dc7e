#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test,
# privileged ones included (as root they create and remove their own lab),
# and every fuzz target briefly on its committed corpus. Ends with one line,
# `N passed, N failed, N inconclusive`, and exits non-zero when anything
# failed. Extra arguments go to `cargo test` (e.g. `--test runs`); with them
# the fuzz step is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Fail instead of skipping when eBPF or root is missing: CI must test the
# real thing, and a skipped test is not a passed one.
export LINECARD_REQUIRE_EBPF=1 LINECARD_REQUIRE_PRIVILEGED=1
# A test whose measurement was not taken (the hypervisor kept it from
# measuring) records it here and is counted inconclusive, never passed
# (harness/tests/common/mod.rs, `inconclusive`).
mkdir -p target
export LINECARD_INCONCLUSIVE_LOG="$PWD/target/inconclusive.log"
log="$PWD/target/test-output.log"
rm -f "$LINECARD_INCONCLUSIVE_LOG" "$log"
# The privileged tests share one lab and leave it up for the next; take it
# down however they end (the project's own teardown: lc-* namespaces,
# cpusets, the root cpuset's load balancing).
trap 'target/debug/linecard lab down >/dev/null 2>&1 || echo "linecard lab down failed" >&2' EXIT
# Lints while building, not in a pass of their own: clippy-driver compiles
# the workspace's crates (cargo's RUSTC_WORKSPACE_WRAPPER, as `cargo
# clippy` does for its check), so the workspace's [lints] and clippy.toml
# apply to the very build the tests run, and the separate check of every
# dependency (100 s of CI here) is gone. Capped at warn so that one run
# still shows every test; any warning fails the lint outcome.
clippy_driver=$(rustup which clippy-driver)
export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
export CLIPPY_ARGS="--cap-lints__CLIPPY_HACKERY__warn__CLIPPY_HACKERY__"
# Precondition: clippy-driver reads its arguments this way (cargo-clippy's
# protocol) and lints: a probe with a known finding must be flagged.
probe=$(mktemp -d)
printf 'pub fn probe(v: &[u8]) -> bool { v.len() == 0 }\n' >"$probe/probe.rs"
said=$(CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" \
    "$clippy_driver" "$(rustup which rustc)" --edition 2021 --crate-type lib \
    --out-dir "$probe" "$probe/probe.rs" 2>&1 || true)
rm -rf "$probe"
if ! grep -q 'clippy::len.zero' <<<"$said"; then
    echo "clippy-driver did not lint the probe: the lint stage would pass on nothing" >&2
    exit 1
fi
build_log="$PWD/target/build-output.log"
status=0
{
    if {
        # The second build `linecard compare`'s test runs against this one:
        # this linecardd with a deliberate regression compiled in (cargo
        # holds its build directory while tests run, so the test cannot
        # build it). Only the engine recompiles; the plain build after it
        # is this one's.
        cargo build --locked -p linecard-engine --bin linecardd --features regress-xdp-replies &&
            mkdir -p target/regressed && cp target/debug/linecardd target/regressed/linecardd &&
            # The second build the upgrade scenario hands the engine over to
            # (harness/tests/runs/handover.rs): the same engine, another binary.
            cargo build --locked -p linecard-engine --bin linecardd --features second-build &&
            mkdir -p target/second && cp target/debug/linecardd target/second/linecardd &&
            # The privileged tests run the real binaries (linecardd among them).
            cargo build --locked --bins &&
            # Default members; xdp/ is built by bpf-objects.
            cargo test --locked --no-run "$@"
    } 2>&1 | tee "$build_log"; then
        built=0
    else
        built=1
    fi
    # One outcome for the lints: no warning for a crate of the workspace
    # in the builds (cargo caps its dependencies' lints and replays a
    # cached crate's warnings).
    if grep -q 'generated [0-9]* warning' "$build_log"; then
        echo "lint clippy workspace ... FAILED"
    else
        echo "lint clippy workspace ... ok"
    fi
    # The fuzz targets build meanwhile, in the background, at SCHED_IDLE
    # and off the last CPU (the lab's DUT CPU): the lab tests mostly wait
    # on their phases, and any task of theirs preempts an idle-policy one
    # at once, on a CPU the DUT does not use. The build's minutes vanish
    # from the test command's time; its outcome is the fuzz stage's.
    if (($# == 0)); then
        last_cpu=$(($(nproc) - 1))
        cpus=0
        ((last_cpu > 0)) && cpus="0-$((last_cpu - 1))"
        RUSTC_WORKSPACE_WRAPPER= taskset -c "$cpus" chrt -i 0 \
            bash scripts/fuzz.sh --build-only >target/fuzz-build.log 2>&1 &
        echo $! >target/fuzz-build.pid
    fi
    # Every test binary runs even after a failure, so one run shows
    # everything.
    ((built == 0)) && cargo test --locked --no-fail-fast "$@"
} 2>&1 | tee "$log" || status=$?
if (($# == 0)); then
    # The targets were built beside the tests (above): wait for that
    # build (at most 20 minutes; cargo's lock would hold fuzz.sh anyway).
    # A failed build shows again, in full, when fuzz.sh builds what is
    # missing.
    if [[ -f target/fuzz-build.pid ]]; then
        for _ in $(seq 1200); do
            kill -0 "$(cat target/fuzz-build.pid)" 2>/dev/null || break
            sleep 1
        done
        rm -f target/fuzz-build.pid
    fi
    # The fuzz crates are workspaces of their own, built by the nightly:
    # not through the stable clippy-driver.
    RUSTC_WORKSPACE_WRAPPER= bash scripts/fuzz.sh "${LINECARD_FUZZ_SECONDS:-1}" --dev 2>&1 | tee -a "$log" || status=$((status ? status : $?))
fi
target/debug/linecard lab down >/dev/null 2>&1 || echo "linecard lab down failed" >&2
trap - EXIT
echo "==== outcomes (target/test-output.log) ===="
bash scripts/outcomes.sh "$log" "$LINECARD_INCONCLUSIVE_LOG" "$status"
