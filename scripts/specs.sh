#!/usr/bin/env bash
# Runs the Ginkgo suite on the running kernel for the modes given (default: every
# mode this kernel supports), writes JSON and JUnit reports to DIR, and fails
# unless every spec ran and passed.
#
#   scripts/specs.sh DIR [MODES]            build into DIR, then run; e.g.
#                                           scripts/specs.sh /tmp/r iptables-nft,ipvs
#   scripts/specs.sh --build-only BINDIR    build svclab, specs.test and checkreport
#                                           into BINDIR and run nothing
#   scripts/specs.sh --prebuilt BINDIR DIR [MODES]
#                                           run what --build-only built (elsewhere)
#
# The last two split the work for a machine that compiles slowly: the Vagrant box
# under TCG needs more than half an hour to build what the host builds in a minute
# (README: "Vagrant"). The binaries are static, so any Linux of the same
# architecture runs them.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"
usage="usage: scripts/specs.sh DIR [MODES] | --build-only BINDIR | --prebuilt BINDIR DIR [MODES]"

# build BINDIR: the suite's three binaries.
build() {
  mkdir -p "$1"
  CGO_ENABLED=0 go build -o "$1/svclab" ./cmd/svclab
  CGO_ENABLED=0 go test -c -o "$1/specs.test" ./specs
  CGO_ENABLED=0 go build -o "$1/checkreport" ./scripts/ci/checkreport
}

# run BINDIR DIR [MODES]: the suite from BINDIR, reports into DIR. The test binary
# runs in specs/, as `go test` would run it, so that it finds its testdata.
run() {
  local bin out
  bin=$(cd "$1" && pwd)
  mkdir -p "$2"
  out=$(cd "$2" && pwd)
  for f in svclab specs.test checkreport; do
    if [ ! -x "$bin/$f" ]; then
      echo "scripts/specs.sh: $bin/$f is missing: build it with scripts/specs.sh --build-only $1" >&2
      exit 2
    fi
  done
  if [ -n "${3:-}" ]; then
    export SVCLAB_MODES=$3
  fi
  # Ginkgo's own suite timeout defaults to 1 h, less than the five host modes
  # may take on a loaded 2-core machine: it is set with Go's.
  (cd specs && SVCLAB_BIN="$bin/svclab" "$bin/specs.test" -test.count=1 -test.timeout=120m -ginkgo.timeout=115m \
    -ginkgo.json-report="$out/specs.json" -ginkgo.junit-report="$out/specs.xml")
  "$bin/checkreport" "$out/specs.json"
}

case "${1:-}" in
  --build-only)
    build "${2:?$usage}"
    ;;
  --prebuilt)
    run "${2:?$usage}" "${3:?$usage}" "${4:-}"
    ;;
  ""|-*)
    echo "$usage" >&2
    exit 2
    ;;
  *)
    build "$1"
    run "$1" "$1" "${2:-}"
    ;;
esac
