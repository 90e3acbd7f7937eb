#!/bin/sh
# scripts/deps.sh: which packages it finds missing and what it runs about them. dpkg-query, dpkg,
# apt-get, sudo and id are fakes on a PATH that holds nothing else (plus awk and grep), so no real
# package is looked at or installed.
. tests/lib.sh
DEPS=$(pwd)/scripts/deps.sh
SH=$(command -v sh)
BIN=$TMPD/bin; mkdir -p "$BIN"
ln -s "$(command -v awk)" "$BIN/awk"; ln -s "$(command -v grep)" "$BIN/grep"

# dpkg-query -W -f=FORMAT PKG...: one "name arch installed" line per package listed in
# $FAKE_INSTALLED as name or name:arch (default amd64) and asked for; like the real one, unknown
# packages are left out.
cat >"$BIN/dpkg-query" <<'EOF'
#!/bin/sh
shift 2
for p in "$@"; do
    for i in $FAKE_INSTALLED; do
        n=${i%%:*}; a=amd64; case "$i" in *:*) a=${i#*:};; esac
        [ "$n" = "$p" ] && echo "$n $a installed"
    done
done
exit 0
EOF
# dpkg: amd64 native, $FAKE_FOREIGN the foreign architectures; --add-architecture is logged
cat >"$BIN/dpkg" <<'EOF'
#!/bin/sh
case "$1" in
    --print-architecture) echo amd64 ;;
    --print-foreign-architectures) for a in $FAKE_FOREIGN; do echo "$a"; done ;;
    --add-architecture) echo "${VIA_SUDO:+sudo }dpkg $*" >>"$APTLOG" ;;
esac
EOF
printf '#!/bin/sh\necho "${FAKE_UID:-0}"\n' >"$BIN/id"
# apt-get logs its arguments (and whether sudo ran it); exits $FAKE_APT_RC
cat >"$BIN/apt-get" <<'EOF'
#!/bin/sh
echo "${VIA_SUDO:+sudo }apt-get $*" >>"$APTLOG"
exit "${FAKE_APT_RC:-0}"
EOF
cat >"$BIN/sudo" <<'EOF'
#!/bin/sh
[ "$1" = -n ] && shift
VIA_SUDO=1 exec "$@"
EOF
chmod +x "$BIN"/*
export APTLOG=$TMPD/apt.log

# run NAME [GROUP...] with FAKE_* set by the caller: output in $TMPD/out, status in $rc
run() { rm -f "$APTLOG"; : >"$APTLOG"; PATH=$BIN "$SH" "$DEPS" "$@" </dev/null >"$TMPD/out" 2>&1; rc=$?; }
ALL="gcc make libc6-dev libpcre2-dev"

FAKE_INSTALLED=$ALL run
[ $rc -eq 0 ] && [ ! -s "$APTLOG" ] && [ ! -s "$TMPD/out" ] && ok deps_all_present ||
    fail deps_all_present "rc=$rc apt=$(cat "$APTLOG") out=$(cat "$TMPD/out")"

# root, libpcre2-dev missing: exactly that package installed, after an update
FAKE_INSTALLED="gcc make libc6-dev" run
[ $rc -eq 0 ] && [ "$(cat "$APTLOG")" = "apt-get update -qq
apt-get install -y -qq --no-install-recommends libpcre2-dev" ] && ok deps_root_installs_missing ||
    fail deps_root_installs_missing "rc=$rc apt=$(cat "$APTLOG")"

# a foreign-architecture copy does not count
FAKE_INSTALLED="gcc make libc6-dev libpcre2-dev:arm64" run
grep -q 'install .*libpcre2-dev$' "$APTLOG" && ok deps_foreign_arch_missing ||
    fail deps_foreign_arch_missing "apt=$(cat "$APTLOG")"
FAKE_INSTALLED="gcc make libc6-dev libpcre2-dev:all" run
[ ! -s "$APTLOG" ] && ok deps_arch_all_present || fail deps_arch_all_present "apt=$(cat "$APTLOG")"

# groups: test adds curl, python3, iproute2 and Open MPI, fuzz adds clang; nothing missing twice
FAKE_INSTALLED=$ALL run test build
[ "$(grep install "$APTLOG")" = "apt-get install -y -qq --no-install-recommends curl python3 iproute2 libopenmpi-dev openmpi-bin" ] && ok deps_group_test ||
    fail deps_group_test "apt=$(cat "$APTLOG")"
# fuzz: the unversioned clang the Makefile calls (clang-14 alone has no `clang`)
FAKE_INSTALLED="$ALL clang-14" run fuzz
[ "$(grep install "$APTLOG")" = "apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev" ] && ok deps_group_fuzz ||
    fail deps_group_fuzz "apt=$(cat "$APTLOG")"
FAKE_INSTALLED="$ALL curl python3 iproute2" run mpi
[ "$(grep install "$APTLOG")" = "apt-get install -y -qq --no-install-recommends libopenmpi-dev openmpi-bin" ] && ok deps_group_mpi ||
    fail deps_group_mpi "apt=$(cat "$APTLOG")"
# client: the guide's client examples (curl, Node's npm)
FAKE_INSTALLED="$ALL" run client
[ "$(grep install "$APTLOG")" = "apt-get install -y -qq --no-install-recommends curl nodejs npm" ] && ok deps_group_client ||
    fail deps_group_client "apt=$(cat "$APTLOG")"
# aarch64: the arm64 PCRE2 needs arm64 among dpkg's architectures; added once, before the update
FAKE_INSTALLED="$ALL" run aarch64
[ "$(cat "$APTLOG")" = "dpkg --add-architecture arm64
apt-get update -qq
apt-get install -y -qq --no-install-recommends gcc-aarch64-linux-gnu qemu-user libpcre2-dev:arm64" ] && ok deps_group_aarch64 ||
    fail deps_group_aarch64 "apt=$(cat "$APTLOG")"
FAKE_FOREIGN=arm64 FAKE_INSTALLED="$ALL gcc-aarch64-linux-gnu qemu-user" run aarch64
[ "$(cat "$APTLOG")" = "apt-get update -qq
apt-get install -y -qq --no-install-recommends libpcre2-dev:arm64" ] && ok deps_aarch64_arch_known ||
    fail deps_aarch64_arch_known "apt=$(cat "$APTLOG")"
# a native copy does not stand in for the arm64 one, the arm64 one counts
FAKE_FOREIGN=arm64 FAKE_INSTALLED="$ALL gcc-aarch64-linux-gnu qemu-user libpcre2-dev:arm64" run aarch64
[ $rc -eq 0 ] && [ ! -s "$APTLOG" ] && ok deps_aarch64_present || fail deps_aarch64_present "rc=$rc apt=$(cat "$APTLOG")"
# not root, no sudo, arm64 unknown: the printed command adds the architecture too
mv "$BIN/sudo" "$BIN/sudo.off"
FAKE_UID=1000 FAKE_INSTALLED="$ALL gcc-aarch64-linux-gnu qemu-user" run aarch64
[ $rc -eq 1 ] && [ ! -s "$APTLOG" ] &&
    grep -qF "as root (su -): dpkg --add-architecture arm64 && apt-get update && apt-get install -y --no-install-recommends libpcre2-dev:arm64" "$TMPD/out" &&
    ok deps_aarch64_prints_command || fail deps_aarch64_prints_command "rc=$rc out=$(cat "$TMPD/out")"
mv "$BIN/sudo.off" "$BIN/sudo"
FAKE_INSTALLED="" run build
[ "$(grep install "$APTLOG")" = "apt-get install -y -qq --no-install-recommends gcc make libc6-dev libpcre2-dev" ] &&
    ok deps_bare_system || fail deps_bare_system "apt=$(cat "$APTLOG")"
FAKE_INSTALLED="" run nonsense
[ $rc -eq 2 ] && grep -q "unknown group 'nonsense'" "$TMPD/out" && ok deps_unknown_group ||
    fail deps_unknown_group "rc=$rc $(cat "$TMPD/out")"

# not root, sudo present: through sudo, never waiting for a password without a terminal
FAKE_UID=1000 FAKE_INSTALLED="gcc make libc6-dev" run
[ $rc -eq 0 ] && grep -qx "sudo apt-get install -y -qq --no-install-recommends libpcre2-dev" "$APTLOG" &&
    ok deps_sudo || fail deps_sudo "rc=$rc apt=$(cat "$APTLOG")"

# not root, no sudo: stops with the command to run as root
mv "$BIN/sudo" "$BIN/sudo.off"
FAKE_UID=1000 FAKE_INSTALLED="gcc make libc6-dev" run
[ $rc -eq 1 ] && [ ! -s "$APTLOG" ] &&
    grep -qF "as root (su -): apt-get update && apt-get install -y --no-install-recommends libpcre2-dev" "$TMPD/out" &&
    ok deps_no_sudo_prints_command || fail deps_no_sudo_prints_command "rc=$rc apt=$(cat "$APTLOG") out=$(cat "$TMPD/out")"
mv "$BIN/sudo.off" "$BIN/sudo"

# check mode reports, installs nothing
FAKE_UID=1000 MOERUN_DEPS=check FAKE_INSTALLED="make libc6-dev" run
[ $rc -eq 1 ] && [ ! -s "$APTLOG" ] &&
    grep -qF "run sudo sh -c 'apt-get update && apt-get install -y --no-install-recommends gcc libpcre2-dev'" "$TMPD/out" &&
    ok deps_check_mode || fail deps_check_mode "rc=$rc out=$(cat "$TMPD/out")"

# apt-get failing: status 1 and the command
FAKE_APT_RC=100 FAKE_INSTALLED="gcc make libc6-dev" run
[ $rc -eq 1 ] && grep -qF "installing failed; run sh -c 'apt-get update && apt-get install -y --no-install-recommends libpcre2-dev'" "$TMPD/out" &&
    ok deps_apt_fails || fail deps_apt_fails "rc=$rc out=$(cat "$TMPD/out")"

# skip, and no dpkg-query at all (not Debian): succeed without touching apt
MOERUN_DEPS=skip FAKE_INSTALLED="" run
[ $rc -eq 0 ] && [ ! -s "$APTLOG" ] && ok deps_skip || fail deps_skip "rc=$rc apt=$(cat "$APTLOG")"
mv "$BIN/dpkg-query" "$BIN/dpkg-query.off"
FAKE_INSTALLED="" run
[ $rc -eq 0 ] && [ ! -s "$APTLOG" ] && grep -q "no dpkg-query" "$TMPD/out" && ok deps_not_debian ||
    fail deps_not_debian "rc=$rc out=$(cat "$TMPD/out")"
mv "$BIN/dpkg-query.off" "$BIN/dpkg-query"

# the Makefile asks for the test group when testing, mpi for MPI=1, fuzz when fuzzing, aarch64 for
# the cross targets (at the top level, before the cross compiler is needed, and in the CROSS sub-make)
make -n test 2>/dev/null | grep -q 'scripts/deps.sh build test' && ok deps_make_test_group ||
    fail deps_make_test_group "$(make -n test 2>&1 | grep deps | head -n 3)"
make -n demo 2>/dev/null | grep -q 'scripts/deps.sh build *$' && ok deps_make_demo_group ||
    fail deps_make_demo_group "$(make -n demo 2>&1 | grep deps | head -n 3)"
make -n MPI=1 2>/dev/null | grep -q 'scripts/deps.sh build *mpi *$' && ok deps_make_mpi_group ||
    fail deps_make_mpi_group "$(make -n MPI=1 2>&1 | grep deps | head -n 3)"
make -n fuzz-build 2>/dev/null | grep -q 'scripts/deps.sh build *fuzz *$' && ok deps_make_fuzz_group ||
    fail deps_make_fuzz_group "$(make -n fuzz-build 2>&1 | grep deps | head -n 3)"
make -n test-aarch64 2>/dev/null | grep -q 'scripts/deps.sh build test *aarch64 *$' && ok deps_make_aarch64_group ||
    fail deps_make_aarch64_group "$(make -n test-aarch64 2>&1 | grep deps | head -n 3)"
make -n CROSS=aarch64-linux-gnu- BUILD=build/aarch64 test-bins 2>/dev/null | grep -q 'scripts/deps.sh build *aarch64 *$' &&
    ok deps_make_cross_group || fail deps_make_cross_group "$(make -n CROSS=aarch64-linux-gnu- test-bins 2>&1 | grep deps | head -n 3)"
