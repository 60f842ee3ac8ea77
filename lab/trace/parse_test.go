package trace

import (
	"strings"
	"testing"
)

// xtLines are xtables-monitor --trace's lines for a SYN from a pod to a
// ClusterIP, as a lab node printed them, with a probe and a retransmission.
var xtLines = strings.Split(`PACKET: 2 aaaaaaaa OUT=lo SRC=127.0.0.1 DST=127.0.0.1 LEN=46 TOS=0x0 TTL=64 ID=1 DF SPORT=40000 DPORT=25555
 TRACE: 2 aaaaaaaa filter:OUTPUT:policy:ACCEPT 
PACKET: 2 3568a6eb IN=cni0 MACSRC=8e:3e:1e:bc:9a:a3 MACDST=1a:64:fa:bf:a3:82 MACPROTO=0800 SRC=10.244.1.5 DST=10.96.123.45 LEN=60 TOS=0x0 TTL=64 ID=3422 DF SPORT=25555 DPORT=80 SYN 
 TRACE: 2 3568a6eb svclab-trace-25555:pre:rule:0x3:CONTINUE  -4 -t svclab-trace-25555 -A pre -p tcp -m tcp --sport 25555 -j TRACE
 TRACE: 2 3568a6eb svclab-trace-25555:pre:policy:ACCEPT 
PACKET: 2 3568a6eb IN=cni0 MACSRC=8e:3e:1e:bc:9a:a3 MACDST=1a:64:fa:bf:a3:82 MACPROTO=0800 SRC=10.244.1.5 DST=10.96.123.45 LEN=60 TOS=0x0 TTL=64 ID=3422 DF SPORT=25555 DPORT=80 SYN 
 TRACE: 2 3568a6eb nat:PREROUTING:rule:0x6:JUMP:KUBE-SERVICES  -4 -t nat -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
 TRACE: 2 3568a6eb nat:KUBE-SEP-IQIBSY2R4USWK4F3:rule:0x1d:ACCEPT  -4 -t nat -A KUBE-SEP-IQIBSY2R4USWK4F3 -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.2.10:8080
PACKET: 2 cb2fbedd IN=cni0 OUT=eth0 SRC=10.244.1.5 DST=10.244.2.10 LEN=60 TOS=0x0 TTL=63 ID=3422 DF SPORT=25555 DPORT=8080 SYN 
 TRACE: 2 cb2fbedd nat:KUBE-POSTROUTING:rule:0x17:0xfffffffb  -4 -t nat -A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
 TRACE: 2 cb2fbedd nat:POSTROUTING:policy:ACCEPT 
PACKET: 2 3568a6eb IN=cni0 SRC=10.244.1.5 DST=10.96.123.45 LEN=60 TOS=0x0 TTL=64 ID=3423 DF SPORT=25555 DPORT=80 SYN 
 TRACE: 2 3568a6eb nat:PREROUTING:policy:ACCEPT `, "\n")

func TestEventsXTablesMonitor(t *testing.T) {
	evs := events(xtLines, 25555)
	var got []string
	for _, e := range evs {
		var rules []string
		for _, r := range e.hook.Rules {
			rules = append(rules, r.Chain+" "+r.Verdict+" ["+r.Comment+"]")
		}
		got = append(got, e.hook.Table+" "+e.hook.Chain+" "+e.hook.Packet+": "+strings.Join(rules, "; ")+" => "+e.hook.Verdict)
	}
	want := []string{
		"svclab-trace-25555 pre in cni0 10.244.1.5:25555 > 10.96.123.45:80: pre continue [] => policy accept",
		"nat PREROUTING in cni0 10.244.1.5:25555 > 10.96.123.45:80: PREROUTING jump KUBE-SERVICES [kubernetes service portals]; KUBE-SEP-IQIBSY2R4USWK4F3 accept [default/web:http] => accept",
		"nat KUBE-POSTROUTING in cni0 out eth0 10.244.1.5:25555 > 10.244.2.10:8080: KUBE-POSTROUTING return [] => policy accept",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r := evs[1].hook.Rules[1].Text; r != `-A KUBE-SEP-IQIBSY2R4USWK4F3 -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.2.10:8080` {
		t.Errorf("rule text %q", r)
	}
}

// nftLines are nft monitor trace's lines for one packet.
var nftLines = strings.Split(`trace id 51e87459 ip svclab-trace-9 out packet: oif "eth0" ip saddr 10.244.1.5 ip daddr 10.96.0.10 ip dscp cs0 ip ecn not-ect ip ttl 64 ip id 3422 ip length 60 tcp sport 9 tcp dport 80 tcp flags == syn tcp window 64240 
trace id 51e87459 ip svclab-trace-9 out rule tcp sport 9 meta nftrace set 1 (verdict continue)
trace id 51e87459 ip svclab-trace-9 out policy accept 
trace id 51e87459 ip kube-proxy nat-output packet: oif "eth0" ip saddr 10.244.1.5 ip daddr 10.96.0.10 ip id 3422 tcp sport 9 tcp dport 80
trace id 51e87459 ip kube-proxy nat-output rule ip daddr . meta l4proto . th dport vmap @service-ips comment "x y" counter packets 3 bytes 180 (verdict jump service-ABC)
trace id 51e87459 ip kube-proxy service-ABC rule numgen random mod 1 vmap { 0 : goto endpoint-XYZ } (verdict goto endpoint-XYZ)
trace id 51e87459 ip kube-proxy endpoint-XYZ rule meta l4proto tcp dnat to 10.244.2.10:8080 (verdict accept)`, "\n")

func TestEventsNFTMonitor(t *testing.T) {
	evs := events(nftLines, 9)
	if len(evs) != 2 {
		t.Fatalf("%d hooks, want 2", len(evs))
	}
	h := evs[1].hook
	if h.Table != "kube-proxy" || h.Chain != "nat-output" || h.Verdict != "accept" || len(h.Rules) != 3 {
		t.Fatalf("hook %+v", h)
	}
	if r := h.Rules[0]; r.Text != `ip daddr . meta l4proto . th dport vmap @service-ips comment "x y"` || r.Verdict != "jump service-ABC" || r.Comment != "x y" {
		t.Errorf("rule %+v", r)
	}
	if r := h.Rules[2]; r.Chain != "endpoint-XYZ" || r.Verdict != "accept" {
		t.Errorf("rule %+v", r)
	}
}

func TestCounterDeltas(t *testing.T) {
	before := parseCounters("*nat\n:PREROUTING ACCEPT [1:60]\n[4:240] -A PREROUTING -j KUBE-SERVICES\n[0:0] -A KUBE-SEP-X -j DNAT --to-destination 10.244.1.10:8080\nCOMMIT\n*filter\n[0:0] -A KUBE-EXTERNAL-SERVICES -m comment --comment \"no local\" -j DROP\nCOMMIT\n")
	after := parseCounters("*nat\n:PREROUTING ACCEPT [1:60]\n[5:300] -A PREROUTING -j KUBE-SERVICES\n[1:60] -A KUBE-SEP-X -j DNAT --to-destination 10.244.1.10:8080\nCOMMIT\n*filter\n[0:0] -A KUBE-EXTERNAL-SERVICES -m comment --comment \"no local\" -j DROP\nCOMMIT\n")
	got := counterDeltas(before, after)
	if len(got) != 2 || got[0].Chain != "PREROUTING" || got[1].Verdict != "DNAT" || got[1].Packets != 1 {
		t.Errorf("deltas %+v", got)
	}
}
