#!/usr/bin/env bash
# Copies run directories into docs/evidence/<scenario>/<run-id>/, where the
# README's and the baselines' numbers are traced to: the manifest, summary
# and status, and per DUT its analysis, canary and steal records, logs,
# configurations and its capture when it is at most 2 MB (a larger one is
# left out and named in MISSING-CAPTURES, its figures still in analysis/).
# The per-packet analysis, the engine's scrapes and the daemons' logs over
# 2 MB, and any other file over 8 MB (at hundreds of sessions), are left
# out likewise and named in LEFT-OUT with their size and SHA-256; the
# manifest and summary, which the published tables are rendered from, are
# always kept.
# A daemon's keys never leave the run directory: in the copies, every
# `secret = "..."` (linecardd) and `password "..."` (BIRD) says
# "(redacted)" (the manifest names each key by id only; the scenario
# test `no_shipped_secret_is_published` fails on a published one).
# Usage: scripts/evidence.sh RUN_DIR...
set -euo pipefail
cd "$(dirname "$0")/.."
max_capture_bytes=$((2 * 1024 * 1024))
max_other_bytes=$((8 * 1024 * 1024))
for run in "$@"; do
    run=${run%/}
    [[ -f $run/manifest.json ]] || { echo "evidence: $run has no manifest.json" >&2; exit 2; }
    scenario=$(basename "$(dirname "$run")")
    into=docs/evidence/$scenario/$(basename "$run")
    mkdir -p "$into"
    (cd "$run" && find . -type f ! -name '*.pcap' ! -name '*.sock' -print0) |
        while IFS= read -r -d '' f; do
            limit=$max_other_bytes
            case $f in
            */packets.csv | */packets.parquet | *.jsonl | *.log) limit=$max_capture_bytes ;;
            esac
            if [[ $f != ./manifest.json && $f != ./summary.md ]] &&
                (($(stat -c %s "$run/$f") > limit)); then
                echo "$f ($(stat -c %s "$run/$f") bytes, sha256 $(sha256sum <"$run/$f" | cut -d' ' -f1))" >>"$into/LEFT-OUT"
                continue
            fi
            mkdir -p "$into/$(dirname "$f")"
            case $f in
            *.toml | *.conf)
                sed -E 's/(secret = ")[^"]*"/\1(redacted)"/g; s/(password ")[^"]*"/\1(redacted)"/g' \
                    "$run/$f" >"$into/$f"
                ;;
            *) cp "$run/$f" "$into/$f" ;;
            esac
        done
    (cd "$run" && find . -type f -name '*.pcap' -print0) |
        while IFS= read -r -d '' f; do
            if (($(stat -c %s "$run/$f") <= max_capture_bytes)); then
                mkdir -p "$into/$(dirname "$f")"
                cp "$run/$f" "$into/$f"
            else
                echo "$f ($(stat -c %s "$run/$f") bytes)" >>"$into/MISSING-CAPTURES"
            fi
        done
    echo "$into"
done
