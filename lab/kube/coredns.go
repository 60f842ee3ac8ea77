package kube

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"text/template"
	"time"

	"github.com/miekg/dns"

	"github.com/svclab/svclab/internal/atomicfile"
	"github.com/svclab/svclab/lab/traffic"
)

// CoreDNS's ports inside its pod's namespace, as kubeadm's Corefile has them:
// DNS, the ready plugin, the health plugin, the prometheus plugin.
const (
	CoreDNSReadyPort   = 8181
	CoreDNSHealthPort  = 8080
	CoreDNSMetricsPort = 9153
)

// CorefileConfig is what a lab's Corefile says.
type CorefileConfig struct {
	// Domain is the cluster domain; empty: DefaultClusterDomain.
	Domain string
	// Kubeconfig is the kubeconfig the kubernetes plugin reads (CoreDNS in a lab
	// is not in a pod with a mounted service account token).
	Kubeconfig string
	// QueryLog adds the log plugin: one line per query in CoreDNS's log.
	QueryLog bool
}

// corefile is kubeadm 1.37's Corefile (cmd/kubeadm/app/phases/addons/dns) less
// what needs an upstream or a ConfigMap: forward (the lab has no upstream, so a
// name outside the cluster domain gets SERVFAIL), loop (it detects forwarding
// loops) and reload (it watches a mounted ConfigMap).
var corefile = template.Must(template.New("Corefile").Parse(`.:53 {
    errors
{{- if .QueryLog}}
    log
{{- end}}
    health {
       lameduck 5s
    }
    ready
    kubernetes {{.Domain}} in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
       kubeconfig {{.Kubeconfig}}
    }
    prometheus :9153
    cache 30 {
       disable success {{.Domain}}
       disable denial {{.Domain}}
    }
    loadbalance
}
`))

// Corefile returns the Corefile of c.
func Corefile(c CorefileConfig) (string, error) {
	if c.Domain == "" {
		c.Domain = DefaultClusterDomain
	}
	if c.Kubeconfig == "" || strings.ContainsAny(c.Kubeconfig, " \t\n{}\"") {
		return "", fmt.Errorf("corefile: kubeconfig path %q: want a path without blanks, braces or quotes", c.Kubeconfig)
	}
	var b strings.Builder
	if err := corefile.Execute(&b, c); err != nil {
		return "", err
	}
	return b.String(), nil
}

// CoreDNSConfig is one CoreDNS process.
type CoreDNSConfig struct {
	// Name names it in messages ("coredns kube-system/coredns-0").
	Name string
	// Netns is its pod's namespace.
	Netns string
	// CorefileConfig is written to Corefile.
	CorefileConfig
	// Corefile is where its Corefile is written.
	Corefile string
	// LogFile receives its output.
	LogFile string
	// WaitFor, when set, makes it wait for this file (the kubeconfig) before
	// it runs (WaitForArgs).
	WaitFor string
}

// StartCoreDNS writes the Corefile and starts CoreDNS from the component binary
// inside c.Netns.
func StartCoreDNS(binary string, c CoreDNSConfig) (*Process, error) {
	name := c.Name
	if name == "" {
		name = "coredns"
	}
	text, err := Corefile(c.CorefileConfig)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// A restart finds its Corefile there, the same, and leaves it alone: a
	// restart needs no room in the run directory (with it full, the
	// rewrite failed and no restart came; os.WriteFile's failed write had
	// also left the Corefile empty). A new one is written whole or not at all.
	if old, err := os.ReadFile(c.Corefile); err != nil || string(old) != text {
		if err := atomicfile.Write(c.Corefile, []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return Start(Command{
		Name: name, Netns: c.Netns,
		Path: binary, Args: WaitForArgs(c.WaitFor, []string{"coredns", "-conf", c.Corefile}),
		LogFile: c.LogFile,
	})
}

// WaitCoreDNS waits until CoreDNS answers DNS inside its namespace: its ready
// plugin answers 200 once the kubernetes plugin has synced with the API server,
// but that can come a moment before the DNS socket is bound (the plugins start
// first), so the wait ends with an answered query for the API server's own
// Service in domain (empty: DefaultClusterDomain). It returns how long after
// CoreDNS's start that was.
func WaitCoreDNS(ctx context.Context, p *Process, domain string) (time.Duration, error) {
	if domain == "" {
		domain = DefaultClusterDomain
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/ready", CoreDNSReadyPort)
	if _, err := waitOK(ctx, p, traffic.HTTPClient(p.Netns, time.Second), url, ""); err != nil {
		return 0, err
	}
	// Asked with svclab's own DNS client: Go's resolver would follow the
	// host's nsswitch.conf, which need not consult DNS at all.
	server := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 53)
	name := "kubernetes.default.svc." + domain + "."
	for {
		resp, err := traffic.Exchange(ctx, p.Netns, "UDP", server, name, dns.TypeA)
		if err == nil && (resp.Rcode != dns.RcodeSuccess || len(resp.Answer) == 0) {
			err = fmt.Errorf("answered %s with %d records", dns.RcodeToString[resp.Rcode], len(resp.Answer))
		}
		if err == nil {
			return time.Since(p.Started), nil
		}
		if exited := p.Exited(); exited != nil {
			return 0, exited
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s: %s not answered (%v): %w", p.Name, name, err, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}
