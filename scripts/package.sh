#!/usr/bin/env bash
# Builds the Debian packages linecardd_VERSION_ARCH.deb (the engine, its
# systemd unit, a commented /etc/linecardd/linecardd.toml, man pages in
# section 8, completions) and linecard_VERSION_ARCH.deb (the harness, man
# pages in section 1, completions) from this workspace, with Debian's own
# dpkg-deb and dpkg-shlibdeps. The BPF object is embedded in linecardd.
#
#   scripts/package.sh [--profile release|debug] [--no-build] [--out DIR]
#                      [--compression xz|gzip|none]
#
# Defaults: a release build (`cargo build --release --bins`), packages in
# target/debian/. `--no-build` packages the binaries already built for the
# profile. Prints the paths of the two packages.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release build=1 out=target/debian compression=xz
while (($#)); do
    case "$1" in
    --profile) profile=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --out) out=$2; shift 2 ;;
    --compression) compression=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$profile" in
release | debug) ;;
*) echo "package.sh: --profile is release or debug, not $profile" >&2; exit 2 ;;
esac
if ((build)); then
    if [[ $profile == release ]]; then
        cargo build --locked --release --bins
    else
        cargo build --locked --bins
    fi
fi
bin=target/$profile
for program in linecardd linecard; do
    [[ -x $bin/$program ]] || { echo "package.sh: $bin/$program is missing (build it, or drop --no-build)" >&2; exit 2; }
done

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)-1
arch=$(dpkg --print-architecture)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# What dpkg-shlibdeps says the binary needs (it reads debian/control).
depends_of() {
    mkdir -p "$work/shlibs/debian"
    printf 'Source: linecard\n\nPackage: linecard\nArchitecture: any\n' >"$work/shlibs/debian/control"
    (cd "$work/shlibs" && dpkg-shlibdeps -O "$1" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
}

# stage PACKAGE PROGRAM BINDIR SECTION: the common part of both packages.
stage() {
    local package=$1 program=$2 bindir=$3 section=$4 root="$work/$1"
    install -d "$root/DEBIAN" "$root/$bindir" "$root/usr/share/man/man$section" \
        "$root/usr/share/doc/$package"
    install -m 0755 "$bin/$program" "$root/$bindir/$program"
    # Debug information is not shipped (lintian: unstripped-binary-or-object).
    strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/$bindir/$program"
    "$root/$bindir/$program" generate man "$work/man-$package"
    for page in "$work/man-$package"/*; do
        gzip -9n <"$page" >"$root/usr/share/man/man$section/$(basename "$page").gz"
    done
    "$root/$bindir/$program" generate completions "$work/completions-$package"
    install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
        "$root/usr/share/fish/vendor_completions.d"
    cp -r "$work/completions-$package"/. "$root/usr/share/"
    install -m 0644 packaging/copyright "$root/usr/share/doc/$package/copyright"
    sed "1s/^linecard /$package /" packaging/changelog | gzip -9n >"$root/usr/share/doc/$package/changelog.Debian.gz"
    find "$root" -type d -exec chmod 0755 {} +
    find "$root/usr/share" -type f -exec chmod 0644 {} +
}

# control PACKAGE DEPENDS SECTION DESCRIPTION...: DEBIAN/control.
control() {
    local package=$1 depends=$2 section=$3 summary=$4 body=$5 root="$work/$1"
    local size
    size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
    {
        echo "Package: $package"
        echo "Version: $version"
        echo "Architecture: $arch"
        echo "Maintainer: linecard developers <linecard@example.invalid>"
        echo "Installed-Size: $size"
        echo "Depends: $depends"
        [[ $package == linecard ]] && echo "Recommends: iproute2, tcpdump, stress-ng, frr, bird2"
        echo "Section: $section"
        echo "Priority: optional"
        echo "Homepage: https://example.invalid/linecard"
        echo "Description: $summary"
        echo "$body" | fold -s -w 72 | sed 's/ *$//; s/^/ /'
    } >"$root/DEBIAN/control"
}

stage linecardd linecardd usr/sbin 8
install -d "$work/linecardd/lib/systemd/system" "$work/linecardd/etc/linecardd"
install -m 0644 packaging/linecardd.service "$work/linecardd/lib/systemd/system/linecardd.service"
install -m 0644 packaging/linecardd.toml "$work/linecardd/etc/linecardd/linecardd.toml"
echo /etc/linecardd/linecardd.toml >"$work/linecardd/DEBIAN/conffiles"
for script in postinst prerm postrm; do
    install -m 0755 "packaging/linecardd.$script" "$work/linecardd/DEBIAN/$script"
done
control linecardd "$(depends_of "$work/linecardd/usr/sbin/linecardd"), passwd" net \
    "BFD engine that holds aggressive timers under load" \
    "linecardd is an RFC 5880/5881/5883 Bidirectional Forwarding Detection daemon with pluggable transmit backends: a plain loop, a real-time thread, SCHED_DEADLINE, SO_TXTIME with etf, and an XDP fast path that answers steady sessions from the kernel. FRR's bfdd can drive it over its dataplane protocol. It runs as its own user with five capabilities under a hardened systemd unit."

stage linecard linecard usr/bin 1
control linecard "$(depends_of "$work/linecard/usr/bin/linecard")" net \
    "measures BFD engines under load from packet captures" \
    "linecard brings up a lab of network namespaces (or real hosts over SSH), runs BFD engines against real peers under stress-ng load, captures packets on an observer outside the device under test, and turns the captures into per-session gap distributions, flaps and maxima, reports, a CI regression gate and comparisons of two builds."

for package in linecardd linecard; do
    (cd "$work/$package" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z |
        xargs -0 md5sum >DEBIAN/md5sums)
    chmod 0644 "$work/$package/DEBIAN/md5sums"
    deb="$out/${package}_${version}_${arch}.deb"
    dpkg-deb --root-owner-group -Z"$compression" --build "$work/$package" "$deb" >/dev/null
    echo "$deb"
done
