package lab

import (
	"context"
	"time"

	"github.com/svclab/svclab/lab/clusterdns"
	"github.com/svclab/svclab/lab/controlplane"
	"github.com/svclab/svclab/lab/kubelet"
	"github.com/svclab/svclab/lab/proxies"
	"github.com/svclab/svclab/lab/topology"
)

// clusterStart is the one start of a lab's control plane and of the
// components that run beside it: the API server, the controller manager, the
// kube-proxies and CoreDNS, the topology written into the API server, and
// DNS answering and reported ready. It holds the parts it orders; none of
// them holds another's start.
type clusterStart struct {
	cp      *controlplane.ControlPlane
	dns     *clusterdns.DNS // nil without cluster DNS
	proxies *proxies.Proxies
	kubelet *kubelet.Kubelet
	timings *timings
	// kubeProxy says the nodes run the real kube-proxy; ownKubeProxy that it
	// is a binary of the user's, which takes no --wait-for.
	kubeProxy, ownKubeProxy bool
	// topology is the lab's topology now; change makes a change of it and
	// re-programs the nodes (Lab.change).
	topology func() *topology.Topology
	change   func(ctx context.Context, mutate func(*topology.Topology) error) error
}

// run starts the cluster. A component takes seconds from its fork to its
// work on a loaded machine (loading a 150 MB binary, a thousand package
// inits, its own set-up): forked beside the API server's start, the
// controller manager and CoreDNS wait for the kubeconfig that ready writes,
// the kube-proxies for the lab's objects to be in the API server
// (OpenProxyGate, once run returns), so that their first sync is the whole
// topology. Without --wait-for (an older component binary) they start once
// the API server is ready, kube-proxy then needing its Node (its address)
// and nothing else.
func (s clusterStart) run(ctx context.Context) error {
	began := time.Now()
	if err := s.cp.StartAPIServer(ctx); err != nil {
		return err
	}
	early := s.cp.WaitsFor()
	var dnsBegan time.Time
	if early {
		if err := s.startComponents(ctx, true); err != nil {
			return err
		}
		dnsBegan = time.Now()
	}
	if err := s.cp.Ready(ctx); err != nil {
		return err
	}
	s.timings.add(phaseAPIServer, began)
	if !early {
		if err := s.startComponents(ctx, false); err != nil {
			return err
		}
	} else if s.ownKubeProxy {
		// A kube-proxy of the user's cannot wait: it starts now.
		s.proxies.StartKubeProxies(ctx)
	}
	if err := s.cp.StartWatch(); err != nil {
		return err
	}
	began = time.Now()
	if err := s.cp.ApplyTopology(ctx, s.kubelet.WritePods); err != nil {
		return err
	}
	s.timings.add(phaseTopology, began)
	if s.dns == nil {
		return nil
	}
	if !early {
		dnsBegan = time.Now()
		if err := s.dns.Launch(s.topology(), ""); err != nil {
			return err
		}
	}
	if err := s.dns.Wait(ctx); err != nil {
		return err
	}
	s.timings.add(phaseDNSAnswers, dnsBegan)
	began = time.Now()
	if err := s.change(ctx, s.dns.Ready); err != nil {
		return err
	}
	s.timings.add(phaseDNSReady, began)
	return nil
}

// startComponents starts the controller manager and the kube-proxies, and
// with early (before the API server is ready; each waits for the kubeconfig)
// the CoreDNS replicas too, which otherwise start once the topology is applied.
// A kube-proxy of the user's is not started early: it cannot wait.
func (s clusterStart) startComponents(ctx context.Context, early bool) error {
	if err := s.cp.StartControllerManager(); err != nil {
		return err
	}
	if s.kubeProxy && (!early || !s.ownKubeProxy) {
		s.proxies.StartKubeProxies(ctx)
	}
	if early && s.dns != nil {
		return s.dns.Launch(s.topology(), s.cp.WaitForKubeconfig())
	}
	return nil
}
