#!/usr/bin/env bash
# Runs the Ginkgo suite on the running kernel for the modes given (default: every
# mode this kernel supports), writes JSON and JUnit reports to DIR, and fails
# unless every spec ran and passed.
#
#   scripts/specs.sh DIR [MODES]     e.g. scripts/specs.sh /tmp/r iptables-nft,ipvs
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"
out=${1:?usage: scripts/specs.sh DIR [MODES]}
mkdir -p "$out"
if [ -n "${2:-}" ]; then
  export SVCLAB_MODES=$2
fi
go build -o "$out/svclab" ./cmd/svclab
SVCLAB_BIN="$out/svclab" go test -count=1 -timeout 120m ./specs \
  -ginkgo.json-report="$out/specs.json" -ginkgo.junit-report="$out/specs.xml"
go run ./scripts/ci/checkreport "$out/specs.json"
