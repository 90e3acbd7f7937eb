#!/bin/sh
# Finds the Debian packages moerun needs that are missing and installs them with apt-get (through
# sudo when not root), or stops with the exact command to run. Called by `make` (all, test, demo)
# before compiling, and by .ci/run.
#   sh scripts/deps.sh [GROUP...]   groups: build (default), test, fuzz
#   MOERUN_DEPS=check   only report: exit 1 with the command when something is missing
#   MOERUN_DEPS=skip    do nothing (non-Debian systems, or packages installed another way)
# Without dpkg-query (not Debian) it says so and succeeds: the compiler then reports what is missing.
set -u

# Package names are Debian 12's. Every entry is used: build = the compiler, make, libc headers and
# PCRE2 (src/tokenizer/pretok.c); test = curl (tests/cli_server.sh talks HTTP to `moerun server`),
# python3 (cli_flags, cli_plots, cli_server_params check files and replies with it) and Open MPI
# (tests/cli_ep.sh runs the `make MPI=1` build under mpirun);
# fuzz = clang with libFuzzer and the sanitizer runtimes (`make fuzz`).
pkgs_build="gcc make libc6-dev libpcre2-dev"
pkgs_test="curl python3 libopenmpi-dev openmpi-bin"
pkgs_fuzz="clang-14 libclang-rt-14-dev"

mode=${MOERUN_DEPS:-install}
[ "$mode" = skip ] && exit 0

want=""
[ $# -eq 0 ] && set -- build
for g in "$@"; do
    case "$g" in
        build) want="$want $pkgs_build" ;;
        test)  want="$want $pkgs_build $pkgs_test" ;;
        fuzz)  want="$want $pkgs_build $pkgs_fuzz" ;;
        *) echo "deps.sh: unknown group '$g' (build, test, fuzz)" >&2; exit 2 ;;
    esac
done

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps.sh: no dpkg-query (not Debian?): not checking packages; needed:$want" >&2
    exit 0
fi

# One dpkg-query for all packages; a package it does not know is simply absent from the output.
# Only the native architecture (or arch-independent) counts: a foreign libpcre2-dev:arm64 for
# cross builds does not give the native compiler its headers.
arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)
installed=$(dpkg-query -W -f='${Package} ${Architecture} ${db:Status-Status}\n' $want 2>/dev/null |
            awk -v a="$arch" '$3 == "installed" && ($2 == a || $2 == "all") { print $1 }')
missing=""
for p in $want; do
    case " $missing " in *" $p "*) continue ;; esac
    if ! printf '%s\n' "$installed" | grep -qx "$p"; then missing="$missing $p"; fi
done
missing=${missing# }
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
else
    sudo="none"
fi
if [ "$sudo" = none ]; then
    cmd="apt-get update && apt-get install -y --no-install-recommends $missing"
    hint="as root (su -): $cmd"
else
    cmd="${sudo:+sudo }sh -c 'apt-get update && apt-get install -y --no-install-recommends $missing'"
    hint="$cmd"
fi

if [ "$mode" = check ] || [ "$sudo" = none ]; then
    echo "deps.sh: missing Debian packages: $missing" >&2
    echo "deps.sh: run $hint" >&2
    exit 1
fi

echo "deps.sh: installing missing Debian packages: $missing" >&2
# sudo may ask for a password on a terminal; without one it must not hang (-n).
if [ -n "$sudo" ] && ! [ -t 0 ]; then sudo="sudo -n"; fi
export DEBIAN_FRONTEND=noninteractive
# A fresh system may have no package lists yet; update first (a failing update with usable lists
# is not fatal, the install below decides).
$sudo apt-get update -qq >/dev/null || echo "deps.sh: apt-get update failed; trying the install anyway" >&2
if ! $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null; then
    echo "deps.sh: installing failed; run $hint" >&2
    exit 1
fi
