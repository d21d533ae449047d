#!/usr/bin/env bash
# Renders an `iolab report` page in a real browser (Debian's headless
# Chromium) and writes a PNG to look at: the check that the page, its
# inline SVG and its CSS show as meant, with nothing fetched.
#
# Usage: bench/report-screenshot.sh [OUT.png]    (default: report.png here)
# Needs: a release build, chromium (apt-get install chromium).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
iolab="$here/target/release/iolab"
out="$(realpath -m "${1:-report.png}")"
command -v chromium >/dev/null || { echo "chromium is missing: apt-get install chromium" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
"$iolab" run --target mem:256m --rw randrw --bs fs --threads 2 --runtime 3 --repeat 2 --json a.json -q >/dev/null
"$iolab" run --target mem:256m --rw randread --bs 4k --runtime 2 --json b.json -q >/dev/null
"$iolab" bonnie --target mem:64m --seeks 512 --json bonnie.json >/dev/null 2>&1
"$iolab" report a.json b.json bonnie.json -o report.html
# No network, no profile: the flags keep Chromium from reaching out.
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile" --window-size=1200,6400 \
    --screenshot="$out" "file://$work/report.html" >/dev/null 2>&1
echo "wrote $out"
