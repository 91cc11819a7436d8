#!/usr/bin/env bash
# Installs the Rack oracle reader's runtime from Debian (bookworm) packages: Ruby 3.1,
# Rack 2.2, Puma 5.6 and WEBrick 1.8, actionpack 6.1 (Rails' ActionDispatch), Devise 4.8
# (only its ParameterFilter is used). Idempotent: apt runs only when one is missing.
# Debian ships one version per package line; the script installs what the suite serves
# and fails if a library is not on the expected line. Versions in use are written to
# $ROOT/.tools/oracle/rack/versions.txt.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../../.." && pwd)"
OUT="$ROOT/.tools/oracle/rack"
PKGS=(ruby ruby-rack puma ruby-webrick ruby-actionpack ruby-devise)

missing=()
for pkg in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "rack reader: need root (or sudo) to apt-get install ${missing[*]}" >&2; exit 1; }
    SUDO=(sudo)
  fi
  echo "rack reader: installing ${missing[*]}" >&2
  "${SUDO[@]}" nice -n 10 apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" nice -n 10 apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

mkdir -p "$OUT"
ruby -e '
  require "rack"; require "puma/const"; require "webrick"; require "json"
  require "action_pack/version"; require "devise/version"
  v = { "ruby" => RUBY_VERSION, "rack" => Rack.release, "puma" => Puma::Const::PUMA_VERSION,
        "webrick" => WEBrick::VERSION, "json" => JSON::VERSION,
        "actionpack" => ActionPack::VERSION::STRING, "devise" => Devise::VERSION }
  want = { "ruby" => "3.1.", "rack" => "2.2.", "puma" => "5.6.", "actionpack" => "6.1.", "devise" => "4.8." }
  bad = want.reject { |k, pre| v[k].start_with?(pre) }
  abort "rack reader: unexpected versions #{bad.keys.map { |k| "#{k} #{v[k]} (want #{want[k]}x)" }.join(", ")}" unless bad.empty?
  File.write(ARGV[0], v.map { |k, x| "#{k} #{x}\n" }.join)
' "$OUT/versions.txt"
