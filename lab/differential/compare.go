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
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
)

// Lab is what the check needs of a running lab (a *lab.Lab is one); the
// caller builds the labs, so this package does not import the one that does.
type Lab interface {
	Mode() string
	Topology() *topology.Topology
	ProxyConfig() proxy.Config
	Member(name string) (*member.Member, error)
	Down() error
}

// Options say which mode to compare and how to build its labs.
type Options struct {
	// Mode is a mode both svclab's proxiers and kube-proxy run (iptables, ipvs).
	Mode string
	// Up builds t in Mode behind a real API server: with the real kube-proxy in
	// every node when kubeProxy is set, else with svclab's proxier.
	Up func(ctx context.Context, t *topology.Topology, kubeProxy bool) (Lab, error)
}

// Pair is one lab state programmed twice.
type Pair struct {
	KubeProxy, Svclab Lab
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
	kp, err := o.Up(ctx, t, true)
	if err != nil {
		return nil, fmt.Errorf("lab %s with kube-proxy: %w", t.Name, err)
	}
	pinned := kp.Topology()
	if err := pinned.SetServices(userServices(pinned)); err != nil {
		return nil, errors.Join(fmt.Errorf("lab %s: pinning kube-proxy's allocations: %w", t.Name, err), kp.Down())
	}
	sv, err := o.Up(ctx, pinned, false)
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
func Snapshot(l Lab, node string) (string, error) {
	mode, err := proxy.Lookup(l.Mode())
	if err != nil {
		return "", err
	}
	n, err := l.Member(node)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, argv := range mode.Rules(l.ProxyConfig()) {
		out, err := namespaces.Output(n.NetNS, argv...)
		if err != nil {
			return "", fmt.Errorf("node %s: %s: %w", node, strings.Join(argv, " "), err)
		}
		fmt.Fprintf(&b, "### %s\n%s", strings.Join(argv, " "), Normalize(argv, string(out)))
	}
	return b.String(), nil
}
