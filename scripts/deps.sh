#!/bin/sh
# Finds the Debian packages moerun needs that are missing and installs them with apt-get (through
# sudo when not root), or stops with the exact command to run. Called by `make` (all, test, demo,
# MPI=1, fuzz, test-aarch64) before compiling, and by .ci/run.
#   sh scripts/deps.sh [GROUP...]   groups: build (default), test, mpi, fuzz, aarch64, client
#   MOERUN_DEPS=check   only report: exit 1 with the command when something is missing
#   MOERUN_DEPS=skip    do nothing (non-Debian systems, or packages installed another way)
# Without dpkg-query (not Debian) it says so and succeeds: the compiler then reports what is missing.
set -u

# Package names are Debian 12's. Every entry is used: build = the compiler, make, libc headers and
# PCRE2 (src/tokenizer/pretok.c); mpi = Open MPI's mpicc and mpirun (`make MPI=1`);
# test = curl (tests/cli_server.sh talks HTTP to `moerun server`), python3 (cli_flags, cli_plots,
# cli_server_params check files and replies with it), iproute2 (tests/cli_netsim.sh: network
# namespaces as simulated hosts) and the mpi group (tests/cli_ep.sh runs the
# `make MPI=1` build under mpirun); fuzz = clang (the unversioned `clang` the Makefile calls; it
# pulls in clang-14) with libFuzzer and the sanitizer runtimes (`make fuzz`); aarch64 = the cross
# compiler, qemu-aarch64 and PCRE2 for arm64 (`make test-aarch64`). NAME:ARCH is a foreign
# architecture's package: its architecture is added to dpkg first when it is not there. client =
# what docs/GUIDE.md's client examples run (curl; nodejs and npm for `npm install openai`); no make
# target asks for it.
pkgs_build="gcc make libc6-dev libpcre2-dev"
pkgs_mpi="libopenmpi-dev openmpi-bin"
pkgs_test="curl python3 iproute2 $pkgs_mpi"
pkgs_fuzz="clang libclang-rt-14-dev"
pkgs_aarch64="gcc-aarch64-linux-gnu qemu-user libpcre2-dev:arm64"
pkgs_client="curl nodejs npm"

mode=${MOERUN_DEPS:-install}
[ "$mode" = skip ] && exit 0

want=""
[ $# -eq 0 ] && set -- build
for g in "$@"; do
    case "$g" in
        build) want="$want $pkgs_build" ;;
        test)  want="$want $pkgs_build $pkgs_test" ;;
        mpi)   want="$want $pkgs_build $pkgs_mpi" ;;
        fuzz)  want="$want $pkgs_build $pkgs_fuzz" ;;
        aarch64) want="$want $pkgs_build $pkgs_aarch64" ;;
        client) want="$want $pkgs_build $pkgs_client" ;;
        *) echo "deps.sh: unknown group '$g' (build, test, mpi, fuzz, aarch64, client)" >&2; exit 2 ;;
    esac
done

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps.sh: no dpkg-query (not Debian?): not checking packages; needed:$want" >&2
    exit 0
fi

# One dpkg-query for all packages (by name: it lists every installed architecture of each); a
# package it does not know is simply absent from the output. A plain NAME counts only for the native
# architecture (or arch-independent): a foreign libpcre2-dev:arm64 for cross builds does not give
# the native compiler its headers. NAME:ARCH counts only for ARCH (or arch-independent).
arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)
names=""
for p in $want; do names="$names ${p%%:*}"; done
installed=$(dpkg-query -W -f='${Package} ${Architecture} ${db:Status-Status}\n' $names 2>/dev/null |
            awk '$3 == "installed" { print $1 ":" $2 }')
missing=""
addarch=""
for p in $want; do
    case " $missing " in *" $p "*) continue ;; esac
    n=${p%%:*}; a=$arch
    case "$p" in *:*) a=${p#*:} ;; esac
    if ! printf '%s\n' "$installed" | grep -qx -e "$n:$a" -e "$n:all"; then
        missing="$missing $p"
        if [ "$a" != "$arch" ] && ! dpkg --print-foreign-architectures 2>/dev/null | grep -qx "$a"; then
            case " $addarch " in *" $a "*) ;; *) addarch="$addarch $a" ;; esac
        fi
    fi
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
# dpkg --add-architecture A for each foreign architecture not yet known, before the update
pre=""
for a in $addarch; do pre="${pre}dpkg --add-architecture $a && "; done
if [ "$sudo" = none ]; then
    cmd="${pre}apt-get update && apt-get install -y --no-install-recommends $missing"
    hint="as root (su -): $cmd"
else
    cmd="${sudo:+sudo }sh -c '${pre}apt-get update && apt-get install -y --no-install-recommends $missing'"
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
for a in $addarch; do
    if ! $sudo dpkg --add-architecture "$a"; then
        echo "deps.sh: dpkg --add-architecture $a failed; run $hint" >&2
        exit 1
    fi
done
# A fresh system may have no package lists yet; update first (a failing update with usable lists
# is not fatal, the install below decides).
$sudo apt-get update -qq >/dev/null || echo "deps.sh: apt-get update failed; trying the install anyway" >&2
if ! $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null; then
    echo "deps.sh: installing failed; run $hint" >&2
    exit 1
fi
