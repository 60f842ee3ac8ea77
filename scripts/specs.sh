#!/usr/bin/env bash
# Runs the Ginkgo suite on the running kernel for the modes given (default: every
# mode this kernel supports), writes JSON and JUnit reports to DIR, and fails
# unless every spec ran and passed. The suite runs in SVCLAB_PROCS parallel
# processes (the ginkgo CLI's --procs; default: procs_default below); the
# specs marked Serial run after the others, alone.
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
# (docs/vagrant.md). The binaries are static, so any Linux of the same
# architecture runs them.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"
usage="usage: scripts/specs.sh DIR [MODES] | --build-only BINDIR | --prebuilt BINDIR DIR [MODES]"

# build BINDIR: the suite's four binaries (ginkgo, the CLI of the module's own
# Ginkgo release, runs the compiled suite in parallel processes).
build() {
  mkdir -p "$1"
  CGO_ENABLED=0 go build -o "$1/svclab" ./cmd/svclab
  CGO_ENABLED=0 go test -c -o "$1/specs.test" ./specs
  CGO_ENABLED=0 go build -o "$1/checkreport" ./scripts/ci/checkreport
  CGO_ENABLED=0 go build -o "$1/ginkgo" github.com/onsi/ginkgo/v2/ginkgo
}

# procs_default: most of a spec's time is waiting (API servers and kube-proxies
# starting, DNS timeouts and conntrack windows on purpose), so two processes per
# CPU; at most one per 2 GiB of memory (a lab with a control plane holds some
# 400 MB: an API server, etcd, a kube-proxy per node, CoreDNS) and one per
# 256 MiB free where labs keep their run directories (/run, a tmpfs of a share
# of memory on Debian: a control plane's etcd preallocates 64 MiB there and a
# lab refuses to start with less than 128 MiB free; a spec holds up to two
# labs); at least 2.
procs_default() {
  local cpus mem_gib run_mib n
  cpus=$(nproc)
  mem_gib=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 / 1024))
  run_mib=$(($(df -Pk /run | awk 'NR == 2 {print $4}') / 1024))
  n=$((cpus * 2))
  [ "$n" -le $((mem_gib / 2)) ] || n=$((mem_gib / 2))
  [ "$n" -le $((run_mib / 256)) ] || n=$((run_mib / 256))
  [ "$n" -ge 2 ] || n=2
  echo "$n"
}

# run BINDIR DIR [MODES]: the suite from BINDIR, reports into DIR. The test binary
# runs in specs/, as `go test` would run it, so that it finds its testdata.
run() {
  local bin out
  bin=$(cd "$1" && pwd)
  mkdir -p "$2"
  out=$(cd "$2" && pwd)
  for f in svclab specs.test checkreport ginkgo; do
    if [ ! -x "$bin/$f" ]; then
      echo "scripts/specs.sh: $bin/$f is missing: build it with scripts/specs.sh --build-only $1" >&2
      exit 2
    fi
  done
  if [ -n "${3:-}" ]; then
    export SVCLAB_MODES=$3
  fi
  local procs=${SVCLAB_PROCS:-$(procs_default)}
  echo "scripts/specs.sh: $procs parallel processes (SVCLAB_PROCS sets them)" >&2
  # The ginkgo CLI starts each process in the binary's directory; the specs
  # read their testdata from SVCLAB_SPECS_DIR instead. Its suite timeout
  # defaults to 1 h, less than a loaded machine may need (it turns Go's test
  # timeout off). --succinct prints a mark per spec as it ends (progress) and a
  # failed spec whole; it merges the processes' reports into one.
  local color=()
  [ -t 1 ] || color=(--no-color)
  # checkreport runs after a failed suite too: its table of where the time
  # went is wanted most then.
  local status=0
  SVCLAB_BIN="$bin/svclab" SVCLAB_SPECS_DIR="$repo/specs" "$bin/ginkgo" --procs="$procs" --timeout=115m \
    "${color[@]}" --succinct --output-dir="$out" --json-report=specs.json --junit-report=specs.xml \
    "$bin/specs.test" || status=$?
  if [ -f "$out/specs.json" ]; then
    "$bin/checkreport" "$out/specs.json" || status=1
  fi
  return "$status"
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
