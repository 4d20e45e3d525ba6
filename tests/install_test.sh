#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# `cmake --install` into one prefix, then the prefix moved: the binary and libp2paudit must find
# the rules they were installed with (not the configure-time prefix, not the source tree), and a
# program built against the moved install through pkg-config and find_package must work.
#
# install_test.sh BUILD_DIR SOURCE_DIR LIBDIR C_COMPILER SANITIZED(0|1)
set -euo pipefail
build=$1 source=$2 libdir=$3 cc=$4 sanitized=$5
fixture=$source/tests/data/machines/h200x4-firecracker-vm/sysroot.tar.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset P2PAUDIT_RULES_DIR
fail() { echo "install_test: $*" >&2; exit 1; }

# A sanitized libp2paudit needs the sanitizers' runtimes (C++ parts included) in the program.
cflags=() libs=()
if [[ $sanitized == 1 ]]; then cflags=(-fsanitize=address,undefined -fsanitize-link-c++-runtime) libs=(-lstdc++); fi

cmake --install "$build" --prefix "$tmp/a" >/dev/null
mv "$tmp/a" "$tmp/b"
prefix=$tmp/b rules=$tmp/b/share/p2paudit/rules
for f in bin/p2paudit "$libdir/libp2paudit.so" "$libdir/libp2paudit.so.0" include/p2paudit.h \
         share/p2paudit/rules/policy/default.yaml "$libdir/pkgconfig/p2paudit.pc" \
         "$libdir/cmake/p2paudit/p2pauditConfig.cmake" "$libdir/cmake/p2paudit/p2pauditConfigVersion.cmake"; do
  [[ -e $prefix/$f ]] || fail "$f was not installed"
done
readelf -d "$prefix/$libdir/libp2paudit.so" | grep -q 'SONAME.*\[libp2paudit\.so\.0\]' || fail "SONAME is not libp2paudit.so.0"
# Only the C API is exported: nothing of the C++ libraries inside it.
others=$(nm -D --defined-only "$prefix/$libdir/libp2paudit.so" | awk '$3 !~ /^(p2paudit_|P2PAUDIT_0(\.[0-9]+)?$)/ {print $3}')
[[ -z $others ]] || fail "exported besides the C API: $(echo "$others" | head -5 | tr '\n' ' ')"
# Symbol versions (capi/src/p2paudit.map): the first functions P2PAUDIT_0, those added later their node.
versions=$(objdump -T "$prefix/$libdir/libp2paudit.so" | awk '$NF ~ /^p2paudit_/ {print $NF, $(NF-1)}')
for expected in "p2paudit_open P2PAUDIT_0" "p2paudit_pair P2PAUDIT_0" "p2paudit_open_with P2PAUDIT_0.1" \
                "p2paudit_check P2PAUDIT_0.1"; do
  grep -qx "$expected" <<<"$versions" || fail "symbol version: expected '$expected' in: $(echo $versions)"
done

# The moved binary reads the moved rules: break one and its error names the moved path.
"$prefix/bin/p2paudit" --sysroot "$fixture" policy --no-probe >/dev/null || fail "the moved p2paudit policy failed"
cp "$rules/policy/default.yaml" "$tmp/default.yaml"
echo 'rules: [' >"$rules/policy/default.yaml"
set +e
error=$("$prefix/bin/p2paudit" --sysroot "$fixture" policy --no-probe 2>&1 >/dev/null); status=$?
set -e
[[ $status == 2 && $error == *"$rules/policy/default.yaml"* ]] ||
  fail "a broken installed rule file was not reported by the moved binary (exit $status): $error"

# The example, built through the moved install's pkg-config file.
pc() { PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig pkg-config "$@" p2paudit; }
[[ $(pc --modversion) == "$("$prefix/bin/p2paudit" --version | awk '{print $NF}')" ]] ||
  fail "pkg-config's version is not the binary's"
# shellcheck disable=SC2046
"$cc" "${cflags[@]}" -Wall -Werror -o "$tmp/may_i_peer" "$source/docs/example/may_i_peer.c" $(pc --cflags --libs) \
  "${libs[@]}" -Wl,-rpath,"$prefix/$libdir"
set +e
error=$("$tmp/may_i_peer" "$fixture" 2>&1 >/dev/null); status=$?
set -e
[[ $status == 2 && $error == *"$rules/policy/default.yaml"* ]] ||
  fail "libp2paudit did not read the moved rules (exit $status): $error"
cp "$tmp/default.yaml" "$rules/policy/default.yaml"

# With the rules restored it answers as `check` does, for the first two GPUs and a pair named.
set +e
output=$("$tmp/may_i_peer" "$fixture"); status=$?
set -e
read -r provider _ client _ <<<"$output"  # "P -> C: kernel ..., policy ..."
client=${client%:}
set +e
check=$("$prefix/bin/p2paudit" --sysroot "$fixture" check "$provider" "$client" --no-probe); check_status=$?
set -e
# The example answers yes or no; check also says "unknown" (3), which is a "no" to a program that must
# decide now.
[[ $status == "$check_status" || ($status == 1 && $check_status == 3) ]] ||
  fail "may_i_peer exited $status, check $check_status: $output / $check"
decision=$(awk 'NR == 1 {print $5}' <<<"$check")  # "yes: P -> C: DECISION (reason)"
[[ $output == *"policy $decision "* ]] || fail "may_i_peer said '$output', check '$check'"
set +e
"$tmp/may_i_peer" "$fixture" "$provider" 0000:ee:1f.7 >/dev/null 2>&1; status=$?
set -e
[[ $status == 2 ]] || fail "a BDF that is not there gave exit $status, not 2"

# find_package(p2paudit) from the moved prefix builds the same program.
mkdir "$tmp/project"
cat >"$tmp/project/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(uses_p2paudit C)
find_package(p2paudit 0.1 REQUIRED)
add_executable(may_i_peer "$source/docs/example/may_i_peer.c")
target_link_libraries(may_i_peer PRIVATE p2paudit::p2paudit ${libs[*]})
CMAKE
# (CMake's own compiler check links a program too: the sanitizers' C++ runtime needs libstdc++ there.)
cmake -S "$tmp/project" -B "$tmp/project/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_C_FLAGS="${cflags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${libs[*]}" >/dev/null || fail "find_package(p2paudit) failed"
cmake --build "$tmp/project/build" >/dev/null || fail "the find_package project did not build"
set +e
"$tmp/project/build/may_i_peer" "$fixture" >/dev/null; status=$?
set -e
[[ $status == "$check_status" || ($status == 1 && $check_status == 3) ]] ||
  fail "the find_package build exited $status, check $check_status"
echo "install_test: ok ($output)"
