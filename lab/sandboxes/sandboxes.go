// Package sandboxes holds a lab's pods' sandboxes: the servers that answer on
// each pod's ports (and on the nodes' host-network endpoints), and the removal
// of a pod's namespace and link.
package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/svclab/svclab/lab/internal/fanout"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/network"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// Sandboxes is the part of a lab that holds its pods' sandboxes: the servers
// that answer on each pod's ports, and the removal of a pod's namespace and
// link. Its lock guards the servers and nothing else: it is taken inside the
// lab's changeMu and mu, and nothing is called with it held.
type Sandboxes struct {
	members  Members
	net      *network.Network
	parallel int

	mu      sync.Mutex
	servers map[string]*traffic.Server
}

// Members is what the sandboxes need of the lab's members: where each
// lives, and to forget a pod's.
type Members interface {
	Member(name string) (*member.Member, error)
	Remove(name string) error
}

// New is the sandboxes of a lab whose members are members and whose network
// is net; parallel bounds how many pods are served at once.
func New(members Members, net *network.Network, parallel int) *Sandboxes {
	return &Sandboxes{members: members, net: net, parallel: parallel}
}

// Serve serves every declared port of each pod, over IPv6 too when the pod
// has an IPv6 address.
func (s *Sandboxes) Serve(ctx context.Context, pods []topology.Pod) error {
	return fanout.Each(ctx, s.parallel, pods, func(_ context.Context, p topology.Pod) error {
		if len(p.Ports) == 0 || p.Component != "" {
			return nil // a component's pod runs the component (CoreDNS)
		}
		m, err := s.members.Member(p.Name)
		if err != nil {
			return err
		}
		srv, err := traffic.Serve(m.NetNS, traffic.Identity{Pod: p.Name, Namespace: p.Namespace, Node: p.Node, IP: p.IP, IP6: p.IP6}, p.Ports)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if s.servers == nil {
			s.servers = map[string]*traffic.Server{}
		}
		s.servers[p.Name] = srv
		s.mu.Unlock()
		return nil
	})
}

// ServeNodes serves, in each node, the ports of the endpoints at the node's
// own address: a host-network endpoint (an API server on a control-plane
// node, a node agent) that an imported cluster's Service has. A port
// something in the node listens on already (a component's) is left to it.
func (s *Sandboxes) ServeNodes(ctx context.Context, nodes []topology.Node, slices []discoveryv1.EndpointSlice) error {
	return fanout.Each(ctx, s.parallel, nodes, func(_ context.Context, n topology.Node) error {
		seen := map[corev1.ContainerPort]bool{}
		for _, sl := range slices {
			for _, e := range sl.Endpoints {
				if len(e.Addresses) == 0 || e.Addresses[0] != n.IP.String() {
					continue
				}
				for _, p := range sl.Ports {
					if p.Port == nil {
						continue
					}
					cp := corev1.ContainerPort{ContainerPort: *p.Port, Protocol: ptr.Deref(p.Protocol, corev1.ProtocolTCP)}
					if seen[cp] {
						continue
					}
					seen[cp] = true
					if err := s.serveNodePort(n, cp); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
}

// serveNodePort serves port cp in node n.
func (s *Sandboxes) serveNodePort(n topology.Node, cp corev1.ContainerPort) error {
	m, err := s.members.Member(n.Name)
	if err != nil {
		return err
	}
	srv, err := traffic.Serve(m.NetNS, traffic.Identity{Node: n.Name, IP: n.IP, IP6: n.IP6}, []corev1.ContainerPort{cp})
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("node %s: its host-network endpoint's port %d/%s: %w", n.Name, cp.ContainerPort, cp.Protocol, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers == nil {
		s.servers = map[string]*traffic.Server{}
	}
	s.servers[fmt.Sprintf("%s %d/%s", n.Name, cp.ContainerPort, cp.Protocol)] = srv
	return nil
}

// Remove tears a pod's sandbox down: its servers, its link and its namespace,
// and its member. Graceful closes the pod's connections first, as a server
// that handles SIGTERM does; otherwise the pod is cut off the network while
// its connections are open, and their peers hear nothing more.
func (s *Sandboxes) Remove(pod topology.Pod, graceful bool) error {
	s.mu.Lock()
	srv := s.servers[pod.Name]
	delete(s.servers, pod.Name)
	s.mu.Unlock()
	m, err := s.members.Member(pod.Name)
	if err != nil {
		return nil // never added
	}
	if graceful && srv != nil {
		srv.Close()
	}
	errs := []error{s.net.UnplugPod(pod)}
	if srv != nil && !graceful {
		srv.Close()
	}
	return errors.Join(append(errs, namespaces.Delete(m.NetNS), s.members.Remove(pod.Name))...)
}

// Close closes every server.
func (s *Sandboxes) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, srv := range s.servers {
		srv.Close()
	}
}
