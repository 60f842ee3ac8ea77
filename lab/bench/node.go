package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// Members of the bench's lab: one node, and on it a client pod and two backend
// pods. The client is a pod on the node, so its packets to a ClusterIP cross the
// node's PREROUTING (iptables) or reach its kube-ipvs0 address (IPVS) exactly as a
// pod's do in a cluster.
const (
	nodeName   = "node-1"
	clientPod  = "pod-1-1"
	backendPod = "pod-1-2"
	otherPod   = "pod-1-3"
)

// synSentTimeout replaces the node's nf_conntrack_tcp_timeout_syn_sent (120 s).
// The prober sends hundreds of SYNs a second at a ClusterIP that has no rule
// yet; each leaves an unanswered, un-NATed conntrack entry, and a later SYN that
// happens to reuse its source port would follow that entry past the new rules
// and be missed. Only entries of unanswered SYNs are affected.
const synSentTimeout = "5"

// node is a lab with one node to program, its pods and servers, and the
// client's prober.
type node struct {
	lab     *lab.Lab
	target  proxy.Target
	nodeNS  string
	nodeIP  netip.Addr
	client  string
	bk      backends
	servers []*traffic.Server
	prober  *prober
}

// upNode builds the lab. name is the topology's name, which prefixes the
// namespaces (svclab-NAME-...). With a control plane (kubeBinary: the
// component binary, empty finds it), the lab runs its API server for the real
// kube-proxy to follow.
func upNode(ctx context.Context, name string, maxE int, pc proberConfig, controlPlane bool, kubeBinary string) (n *node, err error) {
	// No cluster DNS: its CoreDNS pods would be more Services and endpoints,
	// and processes, changing under the measurements.
	t, err := topology.Generate(topology.Scale{Name: name, Nodes: 1, PodsPerNode: 3, NoDNS: true})
	if err != nil {
		return nil, err
	}
	l, err := lab.Up(ctx, t, lab.Options{NoServers: true, ControlPlane: controlPlane, KubeBinary: kubeBinary})
	if err != nil {
		return nil, err
	}
	n = &node{lab: l}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.down())
			n = nil
		}
	}()
	if n.target, err = l.Proxies().Target(nodeName); err != nil {
		return n, err
	}
	nm, err := l.Member(nodeName)
	if err != nil {
		return n, err
	}
	n.nodeNS, n.nodeIP = nm.NetNS, nm.IP
	if err := namespaces.Sysctl(n.nodeNS, []namespaces.Setting{
		{Key: "net.netfilter.nf_conntrack_tcp_timeout_syn_sent", Value: synSentTimeout},
	}); err != nil {
		return n, fmt.Errorf("node %s: %w", nodeName, err)
	}
	cm, err := l.Member(clientPod)
	if err != nil {
		return n, err
	}
	n.client = cm.NetNS
	var pods [2]*member.Member
	for i, name := range []string{backendPod, otherPod} {
		if pods[i], err = l.Member(name); err != nil {
			return n, err
		}
		s, err := traffic.Serve(pods[i].NetNS, traffic.Identity{Pod: name, Namespace: "default", Node: nodeName, IP: pods[i].IP}, servedPorts(maxE))
		if err != nil {
			return n, err
		}
		n.servers = append(n.servers, s)
	}
	n.bk = backends{a: pods[0].IP, b: pods[1].IP, node: nodeName}
	if n.prober, err = newProber(n.client, pc); err != nil {
		return n, err
	}
	return n, nil
}

// down tears everything down; the lab's namespaces go with it.
func (n *node) down() error {
	if n.prober != nil {
		n.prober.close()
	}
	for _, s := range n.servers {
		s.Close()
	}
	return n.lab.Down()
}

// timedSync runs one Sync and times it from the caller's side, the same way for
// every mode.
func timedSync(ctx context.Context, p proxy.Proxier, ports []proxy.ServicePort) (time.Duration, error) {
	start := time.Now()
	err := p.Sync(ctx, proxy.StateOf(ports))
	return time.Since(start), err
}
