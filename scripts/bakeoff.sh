#!/usr/bin/env bash
# The main job: install what is needed, build, bring the local lab up and
# prove it measures what it claims (the DUT's receive path on the DUT's CPUs).
# Grows into `linecard run scenarios/bakeoff.toml` as the runner lands.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export LINECARD_REQUIRE_EBPF=1
cargo build --release --locked -p linecard-harness -p linecard-engine
linecard=target/release/linecard
"$linecard" lab up
"$linecard" lab check
