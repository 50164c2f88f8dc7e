#!/usr/bin/env bash
# Reads the test command's log (cargo test's output and the fuzz lines) and
# the inconclusive log, and prints every test's outcome that is not a pass,
# then one last line `N passed, N failed, N inconclusive`. Exit 1 when
# anything failed (or the log shows a failure no test line names), else 0.
#
# A test that returned after recording an INCONCLUSIVE outcome (its
# measurement was not taken: harness/tests/common/mod.rs, `inconclusive`) is
# counted inconclusive, never passed, even though libtest calls it `ok`.
#
# Usage: outcomes.sh TEST_LOG INCONCLUSIVE_LOG CARGO_STATUS
set -euo pipefail
log=$1 inconclusive=$2 cargo_status=$3
[[ -f $inconclusive ]] || inconclusive=/dev/null
awk -v cargo_status="$cargo_status" -v inconclusive_log="$inconclusive" '
    # The inconclusive log: "<binary>::<test>\t<why>".
    FILENAME == inconclusive_log {
        split($0, f, "\t")
        if (!(f[1] in why)) why[f[1]] = f[2]
        next
    }
    # cargo test announces each binary: "Running tests/run.rs (target/debug/deps/run-0123abcd)".
    /^ *Running .*\(.*\)$/ {
        bin = $0
        sub(/.*\//, "", bin); sub(/\)$/, "", bin); sub(/-[0-9a-f]+$/, "", bin)
        next
    }
    /^ *Doc-tests / { bin = $2; next }
    /^test .* \.\.\. (ok|FAILED|ignored)/ {
        name = $2
        id = bin "::" name
        if ($0 ~ /\.\.\. FAILED/) { failed++; failures = failures "FAILED " id "\n" }
        else if ($0 ~ /\.\.\. ignored/) { ignored++ }
        else if (id in why) { inconclusive_n++; inconclusives = inconclusives "INCONCLUSIVE " id ": " why[id] "\n"; seen[id] = 1 }
        else passed++
        next
    }
    # scripts/fuzz.sh: "fuzz <crate> <target> ... ok|FAILED"; the lint
    # in scripts/test.sh: "lint clippy workspace ... ok|FAILED".
    /^(fuzz|lint) .* \.\.\. (ok|FAILED)$/ {
        if ($NF == "ok") passed++
        else { failed++; failures = failures "FAILED " $2 "::" $3 "\n" }
        next
    }
    END {
        # An outcome recorded by a test no line named (its binary crashed
        # before libtest reported it) is still not a pass.
        for (id in why) if (!(id in seen)) {
            orphan = orphan "INCONCLUSIVE " id " (no test line): " why[id] "\n"
        }
        if (cargo_status != 0 && failed == 0) {
            failed = 1
            failures = failures "FAILED the build or a test binary (cargo test exited " cargo_status " with no failed test named)\n"
        }
        printf "%s%s%s", inconclusives, orphan, failures
        if (ignored) printf "(%d ignored: not run, not counted)\n", ignored
        printf "%d passed, %d failed, %d inconclusive\n", passed, failed, inconclusive_n
        exit failed > 0 ? 1 : 0
    }
' "$inconclusive" "$log"
