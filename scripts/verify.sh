#!/usr/bin/env bash
# svclab's main job on a fresh Debian 12 machine, as root (README: "Run it"):
# installs what svclab needs, builds it into bin/, and runs `svclab verify` on the
# built-in web.yaml in every mode: iptables (nft and legacy backends) on this
# kernel, IPVS in svclab's VM when this kernel has no IPVS (its Debian kernel is
# fetched once with apt-get download). Extra arguments go to svclab verify, e.g.
# `-f topologies/httpd.yaml` or `--json`.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"
scripts/setup.sh
go build -o bin/svclab ./cmd/svclab
exec bin/svclab verify --mode all "$@"
