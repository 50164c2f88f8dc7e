#!/usr/bin/env bash
# Installs what linecard needs on Debian 12, idempotently, and quickly when
# everything is already there. Run as root. Used by both README commands and
# by CI (.ci/run).
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: must run as root (apt-get, rustup components, /usr/local)" >&2
    exit 2
fi

# --- Debian packages ---------------------------------------------------------
PACKAGES=(
    frr bird2 stress-ng tcpdump libpcap-dev bpftool iproute2 ethtool
    openssh-server netcat-openbsd iputils-ping procps python3 tshark chromium
    prometheus curl
    lintian dpkg-dev man-db passwd util-linux systemd
)
missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$pkg")
    fi
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    # Packages such as bird2 start a system service on install; the lab runs
    # its own instances, so forbid service starts for the duration.
    policy=/usr/sbin/policy-rc.d
    created_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod +x "$policy"
        created_policy=1
    fi
    trap '[[ $created_policy == 1 ]] && rm -f "$policy"' EXIT
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [[ $created_policy == 1 ]] && rm -f "$policy"
    trap - EXIT
fi
# A bird service started by an earlier install would answer on the lab's
# peer addresses only if it were inside a lab namespace, but it holds the
# default control socket; stop the packaged service if it runs.
if [[ -s /run/bird/bird.pid ]] && kill -0 "$(cat /run/bird/bird.pid)" 2>/dev/null; then
    log "stopping the packaged bird service"
    service bird stop >/dev/null 2>&1 || kill "$(cat /run/bird/bird.pid)"
fi

# --- Rust toolchains for the BPF object -------------------------------------
# The pinned nightly (its LLVM 22 must match bpf-linker's) with rust-src.
NIGHTLY=nightly
if ! rustup run "$NIGHTLY" rustc -V >/dev/null 2>&1; then
    echo "install-deps: the '$NIGHTLY' toolchain (2026-05-19) is missing; install it with rustup" >&2
    exit 2
fi
if ! rustup component list --toolchain "$NIGHTLY" --installed 2>/dev/null | grep -q '^rust-src'; then
    log "adding rust-src to $NIGHTLY"
    rustup component add rust-src --toolchain "$NIGHTLY" >/dev/null
fi

# clippy for the stable toolchain: the test command lints before it tests.
if ! cargo clippy --version >/dev/null 2>&1; then
    log "adding clippy to the stable toolchain"
    rustup component add clippy >/dev/null
fi

# --- bpf-linker, built against the nightly's own LLVM -----------------------
BPF_LINKER_VERSION=0.13.0
if ! bpf-linker --version 2>/dev/null | grep -q "$BPF_LINKER_VERSION"; then
    log "building bpf-linker $BPF_LINKER_VERSION against the $NIGHTLY toolchain's LLVM"
    sysroot=$(rustup run "$NIGHTLY" rustc --print sysroot)
    llvm=$(cd "$sysroot/lib" && ls libLLVM.so.*-rust-* | head -n1)
    prefix=/opt/linecard-llvm
    mkdir -p "$prefix/lib"
    ln -sf "$sysroot/lib/$llvm" "$prefix/lib/libLLVM.so"
    ln -sf "$sysroot/lib/$llvm" "$prefix/lib/$llvm"
    LLVM_PREFIX=$prefix cargo +"$NIGHTLY" install --quiet --locked bpf-linker \
        --version "$BPF_LINKER_VERSION" --no-default-features --features llvm-22
fi
log "ok"
