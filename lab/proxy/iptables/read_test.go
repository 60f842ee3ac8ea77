package iptables

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/internal/proxytest"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/version"
)

// TestReadFollowsSync programs a throwaway node namespace with svclab's proxier,
// both backends and both layouts, through proxytest.Sequence, and after every
// sync reads the kernel's rules back: Read must give exactly the ServiceMap
// kube-proxy must program for that state. A rule rewritten behind the proxier's
// back (one DNAT target) must then show as exactly that difference.
func TestReadFollowsSync(t *testing.T) {
	for _, backend := range []string{"nft", "legacy"} {
		for _, v := range []version.Version{v137, v118} {
			t.Run(backend+"-"+v.String(), func(t *testing.T) {
				ns := nstest.New(t, "programs iptables")
				cfg := proxy.Config{Backend: backend}
				p := newProxier(t, ns.Path, v, cfg)
				seen := map[string]bool{}
				var last []proxy.ServicePort
				for _, step := range proxytest.Sequence() {
					ports := reproduced(step.Ports, v)
					if err := p.Sync(context.Background(), proxy.StateOf(ports)); err != nil {
						t.Fatalf("%s: %v", step.Name, err)
					}
					got, err := Read(ns, cfg)
					if err != nil {
						t.Fatalf("%s: %v", step.Name, err)
					}
					want := proxy.ExpectedServiceMap(proxy.StateOf(asSeenBy(ports, v)), node1, proxy.ModelIPTables)
					if d := proxy.DiffServiceMaps(want, got); d != nil {
						t.Errorf("%s: Read differs from the expected ServiceMap:\n%s\nread:\n%s", step.Name, strings.Join(d, "\n"), got)
					}
					for _, f := range want {
						seen[kindOf(f)] = true
					}
					last = ports
				}
				// The sequence must have shown the reader every kind of frontend
				// this layout has, or agreeing proved little.
				kinds := []string{"forward", "forward with affinity", "reject", "drop"}
				if v.AtLeast(1, 24) {
					kinds = append(kinds, "forward from source ranges")
				}
				for _, k := range kinds {
					if !seen[k] {
						t.Errorf("the sequence never expected a frontend that does %s", k)
					}
				}

				// Negative control: point the DNAT of default/fresh's only endpoint
				// elsewhere, as a stale or foreign rule would.
				fresh := portNamed(t, last, "fresh")
				e := fresh.Endpoints[0]
				sep := namesOf(fresh, v).sep(e)
				restore := fmt.Sprintf("*nat\n:%s - [0:0]\n-A %s -s %s/32 -j KUBE-MARK-MASQ\n-A %s -p tcp -m tcp -j DNAT --to-destination 10.244.2.99:80\nCOMMIT\n",
					sep, sep, e.IP, sep)
				run := xtables.NewRunner(xtables.Backends[backend], t.TempDir())
				if err := ns.Do(func() error { return run.Restore([]byte(restore)) }); err != nil {
					t.Fatal(err)
				}
				got, err := Read(ns, cfg)
				if err != nil {
					t.Fatal(err)
				}
				want := proxy.ExpectedServiceMap(proxy.StateOf(asSeenBy(last, v)), node1, proxy.ModelIPTables)
				d := proxy.DiffServiceMaps(want, got)
				wantDiff := []string{"TCP 10.96.0.130:80: want forward to 10.244.2.70:80, got forward to 10.244.2.99:80 (missing 10.244.2.70:80; extra 10.244.2.99:80)"}
				if !slices.Equal(d, wantDiff) {
					t.Errorf("after rewriting %s's DNAT, the difference is\n%s\nwant\n%s", sep, strings.Join(d, "\n"), strings.Join(wantDiff, "\n"))
				}
			})
		}
	}
}

// asSeenBy is ports as kube-proxy release v sees them.
func asSeenBy(ports []proxy.ServicePort, v version.Version) []proxy.ServicePort {
	out := make([]proxy.ServicePort, len(ports))
	for i, sp := range ports {
		out[i] = sp.AsSeenBy(v)
	}
	return out
}

// reproduced leaves out what svclab does not reproduce for release v: the
// rules of external and load balancer IPs before 1.24.
func reproduced(ports []proxy.ServicePort, v version.Version) []proxy.ServicePort {
	if v.AtLeast(1, 24) {
		return ports
	}
	out := proxy.ClonePorts(ports)
	for i := range out {
		out[i].ExternalIPs, out[i].LoadBalancerIPs, out[i].SourceRanges = nil, nil, nil
	}
	return out
}

func portNamed(t *testing.T, ports []proxy.ServicePort, name string) *proxy.ServicePort {
	t.Helper()
	for i := range ports {
		if ports[i].Name.Name == name {
			return &ports[i]
		}
	}
	t.Fatalf("no Service %s", name)
	return nil
}

// kindOf names what a frontend does, for the coverage check.
func kindOf(f proxy.Forwarding) string {
	if f.Verdict == proxy.Forward && f.AffinitySeconds > 0 {
		return "forward with affinity"
	}
	if f.Verdict == proxy.Forward && len(f.SourceRanges) > 0 {
		return "forward from source ranges"
	}
	return f.Verdict.String()
}

// TestParseRule reads what a rule does from its options (TestTokenizeRule
// reads the options): a negated source, an affinity check, a refusal.
func TestParseRule(t *testing.T) {
	r, err := parseRule(`-A KUBE-SVC-X ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-MARK-MASQ`)
	if err != nil {
		t.Fatal(err)
	}
	if r.chain != "KUBE-SVC-X" || r.src != "!10.244.0.0/16" || r.dst != "10.96.0.1/32" || r.proto != "tcp" || r.dport != "80" || r.target != "KUBE-MARK-MASQ" || r.other != "" {
		t.Errorf("parsed %+v", *r)
	}
	r, err = parseRule(`-A KUBE-SVC-X -m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-Y --mask 255.255.255.255 --rsource -j KUBE-SEP-Y`)
	if err != nil {
		t.Fatal(err)
	}
	if !r.recentCheck || r.seconds != "10800" || r.target != "KUBE-SEP-Y" || r.other != "" {
		t.Errorf("parsed %+v", *r)
	}
	r, err = parseRule(`-A KUBE-EXTERNAL-SERVICES -p tcp -m addrtype --dst-type LOCAL -m tcp --dport 30100 -j REJECT --reject-with icmp-port-unreachable`)
	if err != nil {
		t.Fatal(err)
	}
	if !refusedBy(r) || r.dstType != "LOCAL" {
		t.Errorf("parsed %+v", *r)
	}
	if _, err := parseRule(`-A KUBE-X -m comment --comment "unterminated`); err == nil {
		t.Error("a rule that does not tokenize was accepted")
	}
}
