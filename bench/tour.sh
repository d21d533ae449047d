#!/usr/bin/env bash
# Runs the README's tour top to bottom, as written, in one shell (so that
# a mount sent to the background with `&` is waited for by the `wait` of a
# later line), from a scratch copy of examples/ beside a link to this
# checkout's target/ (the MPI lines name ../target/release/iolab). Each
# line must exit with the status its comment gives ("(exit N)"), else 0.
# Lines that name a placeholder (/dev/sdX, `iolab run ...`) are skipped;
# `cargo` lines run in the checkout. Prints a line per tour line and a
# summary; exits 1 if any line did not exit as it should.
#
# Usage: bench/tour.sh [--from N]   (root, for the loop devices, FUSE and
# the kernel's file systems; the whole tour takes about half an hour)
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
from=1
[ "${1:-}" = "--from" ] && from="${2:?--from N}"
(cd "$here" && cargo build --release --quiet) || exit 1
work="$(mktemp -d)"
trap 'cd /; umount "$work/examples/mnt" 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$work/examples"
cp -r "$here/examples/." "$work/examples/"
ln -s "$here/target" "$work/target"
export PATH="$here/target/release:$PATH"

# The tour's lines: its first sh block, continuation lines joined, lines
# that are only a comment dropped.
mapfile -t lines < <(awk '/^## Tour/{t=1} t&&/^```sh/{b=1;next} b&&/^```/{exit} b{print}' "$here/README.md" |
    sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta' | grep -v '^[[:space:]]*\(#.*\)\{0,1\}$')

failed=0
n=0
cd "$work/examples"
for line in "${lines[@]}"; do
    n=$((n + 1))
    [ "$n" -lt "$from" ] && continue
    want=0
    [[ "$line" =~ \(exit\ ([0-9]+)\) ]] && want="${BASH_REMATCH[1]}"
    if [[ "$line" == *"/dev/sdX"* || "$line" == *"iolab run ..."* ]]; then
        printf '%3d skip (a placeholder): %s\n' "$n" "${line:0:90}"
        continue
    fi
    start=$SECONDS
    if [[ "$line" == cargo* ]]; then
        (cd "$here" && eval "$line") >"$work/out.$n" 2>&1
    else
        eval "$line" >"$work/out.$n" 2>&1
    fi
    got=$?
    if [ "$got" -eq "$want" ]; then
        printf '%3d ok   (exit %d, %3d s): %s\n' "$n" "$got" $((SECONDS - start)) "${line:0:90}"
    else
        failed=$((failed + 1))
        printf '%3d FAIL (exit %d, wanted %d): %s\n' "$n" "$got" "$want" "${line:0:90}"
        tail -5 "$work/out.$n" | sed 's/^/       /'
    fi
done
echo "tour: $n lines, $failed that did not exit as their comment says"
[ "$failed" -eq 0 ]
