#!/usr/bin/env bash
# A pod dials its own Service's ClusterIP again and again in svclab's VM, the way
# `svclab verify` does (one connection at a time from one pod, "ONCE", read to the
# server's FIN, then close), while other members dial the same Service, and keeps
# the evidence of every attempt that times out: tcpdump on the pod's eth0 and the
# node's cni0, and right after it `ss` in the pod, `conntrack -L`, `ipvsadm -Lnc`,
# `conntrack -S` and `nstat` deltas in the node and the pod. For the IPVS hairpin
# timeouts of issue 18, which a whole verify run (minutes in the emulated VM) meets
# once or twice in 120 checks.
#
#   scripts/vm/hairpin.sh --out DIR [--kube-binary BIN] [--dials N] [--phases "load reuse0"]
#
# --kube-binary runs the real kube-proxy (IPVS mode) behind an API server; without
# it svclab's own IPVS proxier programs the nodes. Phases: alone (only the pod
# dials), load (node-1, node-2, the client pod and the outside client dial beside
# it, as verify's other groups do), reuse0 and reuse1 (load, with node-1's
# net.ipv4.vs.conn_reuse_mode set to 0 or 1 first). DIR gets dials.txt (one line
# per attempt: phase, number, status, milliseconds, the reply naming the backend
# and the client address it saw), snaps.txt, the two captures and up.log.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out= kube= dials=200 phases="alone load"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --kube-binary) kube=$2; shift 2 ;;
    --dials) dials=$2; shift 2 ;;
    --phases) phases=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/vm/hairpin.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "scripts/vm/hairpin.sh: --out DIR is needed (the captures go there)" >&2; exit 2; }
mkdir -p "$out"
vm=(--out "$out" --timeout 40m --env "N=$dials" --env "PHASES=$phases")
if [ -n "$kube" ]; then
  # The control plane needs the memory of a small cluster; without the cluster
  # DNS (dns: false) a loaded emulated VM starts it sooner.
  vm+=(--mem 4096 --kube-binary "$kube" --env "UPARGS=--proxy kube-proxy --kube-binary /svclab/kube/svclab-kube")
fi
exec "$repo/scripts/vm/run.sh" "${vm[@]}" -- bash -c "$(sed -n '/^# --- guest ---$/,$p' "$0")"

# --- guest ---
set -u
out=/out
{ cat /svclab/topologies/web.yaml; echo "dns: false"; } >/tmp/web.yaml
t0=$EPOCHSECONDS
# shellcheck disable=SC2086 # UPARGS is a list of arguments
if ! svclab up -f /tmp/web.yaml --mode ipvs ${UPARGS:-} >$out/up.log 2>&1; then
	echo "up failed"; tail -30 $out/up.log; exit 1
fi
echo "up took $((EPOCHSECONDS - t0))s"
ns() { ip netns list | awk '{print $1}' | grep -- "-$1-" | head -1; }
WA=$(ns web-a) N1=$(ns node-1) N2=$(ns node-2) CL=$(ns client) OUT=$(ns outside)
VIP=10.96.123.45
nsx() { local n=$1; shift; ip netns exec "$n" "$@"; }
nsx "$N1" sysctl net.ipv4.vs.conn_reuse_mode net.ipv4.vs.conntrack net.ipv4.vs.expire_nodest_conn net.netfilter.nf_conntrack_tcp_loose net.netfilter.nf_conntrack_tcp_be_liberal
nsx "$WA" sysctl net.ipv4.tcp_timestamps net.ipv4.tcp_tw_reuse net.ipv4.ip_local_port_range
nsx "$N1" ipvsadm -Ln
nsx "$N1" iptables-save -t nat | grep -e LOOP -e MASQ
nsx "$N1" ipset list KUBE-LOOP-BACK
nsx "$WA" tcpdump -Z root -U -s 128 -i eth0 -w $out/web-a.pcap 'tcp and (port 80 or port 8080 or port 30080)' 2>/dev/null &
td1=$!
nsx "$N1" tcpdump -Z root -U -s 128 -i cni0 -w $out/cni0.pcap 'tcp and (port 80 or port 8080 or port 30080)' 2>/dev/null &
td2=$!
sleep 2
dial() { # NETNS IP PORT: prints the reply; status 0 when answered within verify's 4 s
	ip netns exec "$1" timeout 4 bash -c "exec 3<>/dev/tcp/$2/$3 && echo ONCE >&3 && cat <&3"
}
snap() {
	{
	echo "=== $1 $EPOCHREALTIME"
	echo "--- web-a ss"; nsx "$WA" ss -tanoi
	echo "--- node-1 conntrack -L"; nsx "$N1" conntrack -L -p tcp 2>/dev/null | grep -v -e 6443 -e 2379
	echo "--- node-1 ipvsadm -Lnc"; nsx "$N1" ipvsadm -Lnc
	# kube-proxy adds IPVS's real servers before it writes the nat table in the
	# same sync: is the hairpin's masquerade rule there yet (References: 1)?
	echo "--- node-1 KUBE-LOOP-BACK"; nsx "$N1" iptables-save -t nat | grep KUBE-LOOP-BACK; nsx "$N1" ipset list KUBE-LOOP-BACK | grep -e References -e Members -A1
	echo "--- node-1 conntrack -S"; nsx "$N1" conntrack -S
	echo "--- node-1 nstat (since the attempt began)"; NSTAT_HISTORY=/tmp/nstat.n1 nsx "$N1" nstat
	echo "--- web-a nstat (since the attempt began)"; NSTAT_HISTORY=/tmp/nstat.wa nsx "$WA" nstat
	} >>$out/snaps.txt 2>&1
}
others() { # verify's other groups, side by side with the pod's checks
	while [ -f /tmp/others ]; do
		dial "$N1" $VIP 80 >/dev/null 2>&1
		dial "$OUT" 192.168.1.10 30080 >/dev/null 2>&1
		dial "$N2" 192.168.1.10 30080 >/dev/null 2>&1
		dial "$CL" $VIP 80 >/dev/null 2>&1
	done
}
for phase in $PHASES; do
	case $phase in
	reuse0) nsx "$N1" sysctl -w net.ipv4.vs.conn_reuse_mode=0 ;;
	reuse1) nsx "$N1" sysctl -w net.ipv4.vs.conn_reuse_mode=1 ;;
	esac
	bg=
	if [ "$phase" != alone ]; then touch /tmp/others; others & bg=$!; fi
	fails=0 i=0 p0=$EPOCHSECONDS
	while [ $i -lt "$N" ]; do
		i=$((i + 1))
		NSTAT_HISTORY=/tmp/nstat.n1 nsx "$N1" nstat -n; NSTAT_HISTORY=/tmp/nstat.wa nsx "$WA" nstat -n
		s=${EPOCHREALTIME/./}
		r=$(dial "$WA" $VIP 80 2>&1); rc=$?
		ms=$(( (${EPOCHREALTIME/./} - s) / 1000 ))
		echo "$phase $i rc=$rc ms=$ms $EPOCHREALTIME $r" >>$out/dials.txt
		if [ $rc -ne 0 ]; then
			fails=$((fails + 1))
			echo "$phase attempt $i: status $rc after ${ms} ms"
			snap "$phase attempt $i"
		fi
	done
	rm -f /tmp/others; [ -n "$bg" ] && wait $bg
	echo "phase $phase: $N dials, $fails timed out, $((EPOCHSECONDS - p0)) s"
done
snap end
kill $td1 $td2; wait
svclab down web >/dev/null 2>&1
