#!/usr/bin/env bash
# Refresh the vendored xterm.js files from npm at the versions pinned in PINS (edit PINS to
# upgrade), then record their SHA-256 in SHA256SUMS (tests/ui checks the shipped files
# against it). Needs node + npm; the installed package needs neither.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fetch() {  # fetch <package> <version> <dest dir>: npm checks the tarball's integrity
    local tarball
    tarball="$(cd "$work" && npm pack --silent "$1@$2")"
    mkdir -p "$work/$3"
    tar -xzf "$work/$tarball" -C "$work/$3" --strip-components=1
}

while read -r package version; do
    case "$package" in ''|'#'*) continue ;; esac
    case "$package" in
        @xterm/xterm) fetch "$package" "$version" xterm
            mkdir -p "$here/xterm"
            sed '/^\/\/# sourceMappingURL=/d' "$work/xterm/lib/xterm.mjs" > "$here/xterm/xterm.mjs"
            cp "$work/xterm/css/xterm.css" "$here/xterm/xterm.css"
            cp "$work/xterm/LICENSE" "$here/xterm/LICENSE" ;;
        @xterm/addon-fit) fetch "$package" "$version" fit
            mkdir -p "$here/addon-fit"
            sed '/^\/\/# sourceMappingURL=/d' "$work/fit/lib/addon-fit.mjs" > "$here/addon-fit/addon-fit.mjs"
            cp "$work/fit/LICENSE" "$here/addon-fit/LICENSE" ;;
        *) echo "refresh.sh: no recipe for $package" >&2; exit 1 ;;
    esac
    echo "$package@$version"
done < "$here/PINS"

(cd "$here" && sha256sum xterm/xterm.mjs xterm/xterm.css xterm/LICENSE \
    addon-fit/addon-fit.mjs addon-fit/LICENSE > SHA256SUMS)
