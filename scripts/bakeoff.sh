#!/usr/bin/env bash
# The main job: install what is needed, build, and run the transmit bake-off
# on the local lab (FRR bfdd and every linecardd backend under L4, 60 s
# each, ~7 minutes). Results: results/bakeoff/<run-id>/ (summary.md,
# manifest.json, one capture per DUT). Exit 0 when the run is complete,
# 1 when a DUT failed or the run is invalid.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export LINECARD_REQUIRE_EBPF=1
cargo build --release --locked -p linecard-harness -p linecard-engine
exec target/release/linecard run scenarios/bakeoff.toml "$@"
