package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
)

// HealthzPort is kube-proxy's default --healthz-bind-address port.
const HealthzPort = 10256

// HealthServer is kube-proxy's health checking on one node, the same in every mode:
// for each Service with a healthCheckNodePort (LoadBalancer with
// externalTrafficPolicy Local) an HTTP server on that port of every node address,
// answering 200 while the node has ready endpoints of the Service and 503 otherwise,
// so a cloud load balancer sends traffic only to nodes that can keep the client's
// address; and kube-proxy's own /healthz and /livez on port 10256. The listeners
// are opened inside the node's network namespace and served from ordinary
// goroutines.
type HealthServer struct {
	ns   *namespaces.NS
	node string

	mu          sync.RWMutex
	services    map[string]*serviceHealth // by "namespace/name"
	lastUpdated time.Time
	healthz     *http.Server
}

// serviceHealth is one Service's health check port.
type serviceHealth struct {
	namespace, name string
	port            int
	server          *http.Server
	localEndpoints  int
}

// NewHealthServer opens kube-proxy's /healthz (port 10256) in the network namespace
// at netnsPath, the namespace of the node called node. Service health checks follow
// with Update.
func NewHealthServer(netnsPath, node string) (*HealthServer, error) {
	ns, err := namespaces.OpenPath(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("health server of node %s: %w", node, err)
	}
	h := &HealthServer{ns: ns, node: node, services: map[string]*serviceHealth{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", h.serveHealthz)
	mux.HandleFunc("/livez", h.serveHealthz)
	l, err := h.listen(HealthzPort)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("health server of node %s: kube-proxy healthz: %w", node, err)
	}
	h.healthz = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go h.healthz.Serve(l) //nolint:errcheck // Serve returns ErrServerClosed on Close
	return h, nil
}

// listen opens a TCP listener on 0.0.0.0:port inside the node's namespace, as
// kube-proxy does with nodePortAddresses unset. The socket stays in the namespace
// whatever goroutine serves it.
func (h *HealthServer) listen(port int) (net.Listener, error) {
	var l net.Listener
	err := h.ns.Do(func() error {
		var err error
		l, err = net.Listen("tcp4", net.JoinHostPort("0.0.0.0", strconv.Itoa(port)))
		return err
	})
	return l, err
}

// Update opens and closes health check servers so there is one per Service with a
// healthCheckNodePort in ports, and sets each one's count of ready endpoints on this
// node (distinct addresses over all the Service's ports, as kube-proxy counts
// them). Call it after every sync. A port that cannot be opened is reported and
// the others are kept.
func (h *HealthServer) Update(ports []ServicePort) error {
	want := map[string]int{}
	names := map[string][2]string{}
	localIPs := map[string]map[string]bool{}
	for _, sp := range ports {
		svc := sp.Name.NamespacedName()
		if sp.HealthCheckNodePort != 0 {
			want[svc] = sp.HealthCheckNodePort
			names[svc] = [2]string{sp.Name.Namespace, sp.Name.Name}
		}
		for _, e := range sp.Endpoints {
			// Only ready endpoints count: a node left with terminating ones should
			// fail its check so the load balancer drains it.
			if e.Ready && e.NodeName == h.node {
				if localIPs[svc] == nil {
					localIPs[svc] = map[string]bool{}
				}
				localIPs[svc][e.IP.String()] = true
			}
		}
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for svc, s := range h.services {
		if port, ok := want[svc]; !ok || port != s.port {
			errs = append(errs, s.server.Close())
			delete(h.services, svc)
		}
	}
	order := make([]string, 0, len(want))
	for svc := range want {
		order = append(order, svc)
	}
	sort.Strings(order)
	for _, svc := range order {
		if h.services[svc] != nil {
			continue
		}
		s := &serviceHealth{namespace: names[svc][0], name: names[svc][1], port: want[svc]}
		l, err := h.listen(s.port)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: health check of service %s on port %d: %w", h.node, svc, s.port, err))
			continue
		}
		s.server = &http.Server{Handler: h.serviceHandler(svc), ReadHeaderTimeout: 10 * time.Second}
		go s.server.Serve(l) //nolint:errcheck // Serve returns ErrServerClosed on Close
		h.services[svc] = s
	}
	for svc, s := range h.services {
		s.localEndpoints = len(localIPs[svc])
	}
	h.lastUpdated = time.Now()
	return errors.Join(errs...)
}

// serviceHandler answers as kube-proxy's health check server does: the count in a
// header and a JSON body, 200 when the node has a ready endpoint, 503 when not.
func (h *HealthServer) serviceHandler(svc string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h.mu.RLock()
		s := h.services[svc]
		var count int
		var namespace, name string
		if s != nil {
			count, namespace, name = s.localEndpoints, s.namespace, s.name
		}
		h.mu.RUnlock()
		if s == nil {
			// kube-proxy answers a request racing a closed check with nothing.
			return
		}
		// svclab's proxiers sync synchronously: a proxier that returned is
		// healthy, so kube-proxy's serviceProxyHealthy is always true here.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
		if count != 0 {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
			namespace, name, count, true)
	})
}

// proxyHealth is the JSON kube-proxy's /healthz returns (its ProxyHealth).
type proxyHealth struct {
	LastUpdated  time.Time                `json:"lastUpdated"`
	CurrentTime  time.Time                `json:"currentTime"`
	NodeEligible *bool                    `json:"nodeEligible,omitempty"`
	Healthy      bool                     `json:"healthy"`
	Status       map[string]proxierHealth `json:"status,omitempty"`
}

type proxierHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// serveHealthz answers /healthz and /livez. svclab's syncs are synchronous, so no
// update is ever overdue and the proxy is healthy; the node is never being deleted,
// so it is eligible. lastUpdated is the last Update.
func (h *HealthServer) serveHealthz(w http.ResponseWriter, r *http.Request) {
	h.mu.RLock()
	last := h.lastUpdated
	h.mu.RUnlock()
	now := time.Now()
	// kube-proxy reports the current time as lastUpdated when healthy.
	health := proxyHealth{LastUpdated: now, CurrentTime: now, Healthy: true, Status: map[string]proxierHealth{}}
	if !last.IsZero() {
		health.Status["IPv4"] = proxierHealth{LastUpdated: last, Healthy: true}
	}
	if r.URL.Path == "/healthz" {
		eligible := true
		health.NodeEligible = &eligible
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	out, _ := json.Marshal(health)
	w.Write(out) //nolint:errcheck // the client went away
}

// Close stops every server of the node.
func (h *HealthServer) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for svc, s := range h.services {
		errs = append(errs, s.server.Close())
		delete(h.services, svc)
	}
	if h.healthz != nil {
		errs = append(errs, h.healthz.Close())
		h.healthz = nil
	}
	if h.ns != nil {
		errs = append(errs, h.ns.Close())
		h.ns = nil
	}
	return errors.Join(errs...)
}
