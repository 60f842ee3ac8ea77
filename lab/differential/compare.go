// Package differential checks that svclab's own proxiers program what the real
// kube-proxy programs. The same lab state is built twice, once with the real
// kube-proxy in every node and once with svclab's proxier (both behind a real API
// server, so both see the same Services, EndpointSlices and `kubernetes`
// Service), and every node's rules are compared after normalize: a difference
// is a bug in svclab's copy of kube-proxy, or a change in kube-proxy.
package differential

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
)

// Options say which mode to compare.
type Options struct {
	// Mode is a mode both svclab's proxiers and kube-proxy run (iptables, ipvs).
	Mode string
	// Backend is the xtables backend both use.
	Backend string
	// KubeBinary is the component binary; empty finds or builds it.
	KubeBinary string
	// Log receives the labs' progress; nil discards it.
	Log io.Writer
}

// Pair is one lab state programmed twice.
type Pair struct {
	KubeProxy, Svclab *lab.Lab
}

// UpPair builds t with the real kube-proxy, then again with svclab's proxier,
// the second with the first's allocations (ClusterIPs, NodePorts, health check
// ports) written into its Services, since the API server picks free ones at
// random.
func UpPair(ctx context.Context, t *topology.Topology, o Options) (*Pair, error) {
	m, err := proxy.Lookup(o.Mode)
	if err != nil {
		return nil, err
	}
	if err := m.HasProxier(); err != nil {
		return nil, fmt.Errorf("differential check of %s: %w", t.Name, err)
	}
	base := lab.Options{Mode: o.Mode, Proxy: proxy.Config{Backend: o.Backend}, KubeBinary: o.KubeBinary, Log: o.Log}
	kpOpts := base
	kpOpts.KubeProxy = &lab.KubeProxyOptions{}
	kp, err := lab.Up(ctx, t, kpOpts)
	if err != nil {
		return nil, fmt.Errorf("lab %s with kube-proxy: %w", t.Name, err)
	}
	pinned := kp.Topology()
	if err := pinned.SetServices(userServices(pinned)); err != nil {
		return nil, errors.Join(fmt.Errorf("lab %s: pinning kube-proxy's allocations: %w", t.Name, err), kp.Down())
	}
	own := base
	own.ControlPlane = true
	sv, err := lab.Up(ctx, pinned, own)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("lab %s with svclab's proxier: %w", t.Name, err), kp.Down())
	}
	return &Pair{KubeProxy: kp, Svclab: sv}, nil
}

// userServices are t's Services but the ones the API server makes by itself
// (default/kubernetes), which a lab does not create.
func userServices(t *topology.Topology) []corev1.Service {
	var out []corev1.Service
	for _, s := range t.Services {
		if s.Namespace == "default" && s.Name == "kubernetes" {
			continue
		}
		out = append(out, s)
	}
	return out
}

// Down tears both labs down.
func (p *Pair) Down() error {
	return errors.Join(p.KubeProxy.Down(), p.Svclab.Down())
}

// NodeDiff is one node whose rules differ: both sides, normalized, and a unified
// diff from kube-proxy's to svclab's.
type NodeDiff struct {
	Node              string
	KubeProxy, Svclab string
	Diff              string
}

func (d NodeDiff) String() string {
	return fmt.Sprintf("node %s: svclab's proxier and kube-proxy differ:\n%s\n--- kube-proxy, normalized:\n%s\n--- svclab, normalized:\n%s",
		d.Node, d.Diff, d.KubeProxy, d.Svclab)
}

// Diff reads every node of both labs and returns the nodes whose rules differ.
func (p *Pair) Diff() ([]NodeDiff, error) {
	var diffs []NodeDiff
	for _, n := range p.Svclab.Topology().Nodes {
		want, err := Snapshot(p.KubeProxy, n.Name)
		if err != nil {
			return nil, err
		}
		got, err := Snapshot(p.Svclab, n.Name)
		if err != nil {
			return nil, err
		}
		if got == want {
			continue
		}
		diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(want), B: difflib.SplitLines(got),
			FromFile: "kube-proxy " + n.Name, ToFile: "svclab " + n.Name, Context: 3,
		})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		diffs = append(diffs, NodeDiff{Node: n.Name, KubeProxy: want, Svclab: got, Diff: diff})
	}
	return diffs, nil
}

// Snapshot is what a node of l holds in l's mode (the mode's Rules commands),
// normalized, one section per command.
func Snapshot(l *lab.Lab, node string) (string, error) {
	m, err := proxy.Lookup(l.Mode())
	if err != nil {
		return "", err
	}
	member, err := l.Member(node)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, argv := range m.Rules(l.ProxyConfig()) {
		out, err := namespaces.Output(member.NetNS, argv...)
		if err != nil {
			return "", fmt.Errorf("lab %s node %s: %s: %w", l.ID, node, strings.Join(argv, " "), err)
		}
		fmt.Fprintf(&b, "### %s\n%s", strings.Join(argv, " "), Normalize(argv, string(out)))
	}
	return b.String(), nil
}
