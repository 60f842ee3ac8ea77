#!/usr/bin/env bash
# svclab's main job on a fresh Debian 12 machine, as root (README: "Run it"):
# installs what svclab needs, builds it into bin/, and runs `svclab verify` on the
# built-in web.yaml in every mode of svclab's own proxiers: iptables (nft and
# legacy backends) on this kernel, IPVS in svclab's VM when this kernel has no
# IPVS (its Debian kernel is fetched once with apt-get download); then with the
# real kube-proxy in nftables mode behind a real kube-apiserver. Extra arguments
# go to both runs of svclab verify, e.g. `-f topologies/httpd.yaml`.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"
scripts/setup.sh
go build -o bin/svclab ./cmd/svclab
# svclab's own proxiers, every mode and backend (IPVS in the VM when this kernel
# lacks it).
status=0
bin/svclab verify --mode all "$@" || status=$?
# The real thing: kube-apiserver, the EndpointSlice controller and kube-proxy in
# nftables mode (GA since 1.33) in every node. The components are built from
# components/ on first use (several minutes; progress below) and cached.
bin/svclab verify --proxy kube-proxy --mode nftables "$@" || status=$?
exit $status
