package proxy

// Categorized is the split of a port's endpoints that one node's proxier uses, as
// kube-proxy's CategorizeEndpoints computes it (topology hints are not supported by
// svclab, so they never narrow the cluster set).
type Categorized struct {
	// Cluster are the endpoints traffic with policy Cluster goes to: the ready ones,
	// or, when none is ready, the serving terminating ones.
	Cluster []Endpoint
	// Local are the endpoints on this node traffic with policy Local goes to: the
	// local ready ones, or, when none is ready, the local serving terminating ones.
	Local []Endpoint
	// All is every endpoint some traffic on this node can reach.
	All []Endpoint
	// HasAny tells whether the port has any usable endpoint anywhere; when it has
	// none kube-proxy rejects its traffic rather than dropping it.
	HasAny bool
}

// Categorize splits sp's endpoints for the node called node.
func Categorize(sp *ServicePort, node string) Categorized {
	var c Categorized
	if len(sp.Endpoints) == 0 {
		return c
	}
	if sp.UsesClusterEndpoints() {
		c.Cluster = filter(sp.Endpoints, func(e Endpoint) bool { return e.Ready })
		if len(c.Cluster) == 0 {
			c.Cluster = filter(sp.Endpoints, func(e Endpoint) bool { return e.Serving && e.Terminating })
		}
		c.HasAny = len(c.Cluster) > 0
	}
	if !sp.UsesLocalEndpoints() {
		c.All = c.Cluster
		return c
	}
	usingTerminating := false
	localReady := filter(sp.Endpoints, func(e Endpoint) bool { return e.Ready && e.NodeName == node })
	for _, e := range sp.Endpoints {
		if e.Ready || (e.Serving && e.Terminating) {
			c.HasAny = true
		}
	}
	if len(localReady) > 0 {
		c.Local = localReady
	} else {
		c.Local = filter(sp.Endpoints, func(e Endpoint) bool { return e.Serving && e.Terminating && e.NodeName == node })
		usingTerminating = len(c.Local) > 0
	}
	if !sp.UsesClusterEndpoints() {
		c.All = c.Local
		return c
	}
	if !usingTerminating {
		c.All = c.Cluster
		return c
	}
	c.All = union(c.Cluster, c.Local)
	return c
}

func filter(eps []Endpoint, keep func(Endpoint) bool) []Endpoint {
	var out []Endpoint
	for _, e := range eps {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

func union(a, b []Endpoint) []Endpoint {
	seen := map[string]bool{}
	var out []Endpoint
	for _, list := range [][]Endpoint{a, b} {
		for _, e := range list {
			if !seen[e.String()] {
				seen[e.String()] = true
				out = append(out, e)
			}
		}
	}
	return out
}
