#!/usr/bin/env bash
# Builds svclab (and, with --test, Go test binaries) and runs them inside svclab's
# VM: a qemu guest booting Debian's kernel, which has IPVS, ipset and dummy links
# that the host kernel may lack. For CI and for trying the IPVS mode anywhere.
#
#   scripts/vm/run.sh [options] -- COMMAND [ARG...]   run COMMAND in the guest
#   scripts/vm/run.sh [options] --test PKG [--test PKG...] [-- TEST-FLAG...]
#                                                   run test binaries in the guest
#
# In the guest, /svclab/bin (first on PATH) holds svclab and the test binaries,
# /svclab/topologies the repository's topologies, /svclab/src/DIR the tested
# packages' sources (test binaries run there, so testdata/ is found).
# Options: --out DIR (guest /out is copied there), --timeout DUR (default 30m),
# --accel auto|kvm|tcg, --cpus N, --mem MIB, --env NAME=VALUE, --console,
# --kube-binary PATH (the Kubernetes components' binary, `svclab kube-binary`:
# copied to /svclab/kube in the guest and named by $SVCLAB_KUBE_BINARY there, for
# labs with a control plane or the real kube-proxy; give them --mem 4096).
# Exit status: the guest command's, or 125 when the VM itself failed.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"

runner_flags=()
tests=()
kube_binary=
while [ $# -gt 0 ]; do
  case "$1" in
    --test) tests+=("$2"); shift 2 ;;
    --out) runner_flags+=(-out "$2"); shift 2 ;;
    --timeout) runner_flags+=(-timeout "$2"); shift 2 ;;
    --accel) runner_flags+=(-accel "$2"); shift 2 ;;
    --cpus) runner_flags+=(-cpus "$2"); shift 2 ;;
    --mem) runner_flags+=(-mem "$2"); shift 2 ;;
    --env) runner_flags+=(-e "$2"); shift 2 ;;
    --console) runner_flags+=(-console); shift ;;
    --kube-binary)
      [ -x "$2" ] || { echo "scripts/vm/run.sh: --kube-binary $2: not an executable file (svclab kube-binary prints the path)" >&2; exit 2; }
      kube_binary=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/vm/run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ ${#tests[@]} -eq 0 ] && [ $# -eq 0 ]; then
  echo "scripts/vm/run.sh: give a command after --, or --test PKG (see --help)" >&2
  exit 2
fi

build=$(mktemp -d "${TMPDIR:-/tmp}/svclab-build.XXXXXX")
trap 'rm -rf "$build"' EXIT
mkdir -p "$build/bin" "$build/src"

go build -o "$build/svclab-vm" ./vm/cmd/svclab-vm
# Guest binaries are static: the guest has glibc for its tools, but nothing else.
CGO_ENABLED=0 go build -o "$build/bin/svclab" ./cmd/svclab
files=(-f "bin=$build/bin" -f "topologies=$repo/topologies")
if [ -n "$kube_binary" ]; then
  files+=(-f "kube/svclab-kube=$kube_binary")
  runner_flags+=(-e SVCLAB_KUBE_BINARY=/svclab/kube/svclab-kube)
fi

if [ ${#tests[@]} -gt 0 ]; then
  {
    echo 'failed=0'
    for pkg in "${tests[@]}"; do
      dir=$(go list -f '{{.Dir}}' "$pkg")
      rel=${dir#"$repo"/}
      name=$(echo "$rel" | tr / _).test
      CGO_ENABLED=0 go test -c -o "$build/bin/$name" "$pkg"
      mkdir -p "$build/src/$(dirname "$rel")"
      cp -r "$dir" "$build/src/$rel"
      echo "echo \"=== $rel\"; (cd /svclab/src/$rel && /svclab/bin/$name \"\$@\") || failed=1"
    done
    echo 'exit $failed'
  } > "$build/bin/run-tests.sh"
  files+=(-f "src=$build/src")
  set -- bash /svclab/bin/run-tests.sh "$@"
fi

status=0
"$build/svclab-vm" "${runner_flags[@]}" "${files[@]}" -- "$@" || status=$?
exit "$status"
