package kube

import (
	"net/netip"
	"strconv"
	"strings"
)

// DefaultControllerManagerPort is the controller manager's secure (health and
// metrics) port, upstream's default.
const DefaultControllerManagerPort = 10257

// DefaultControllers are the controllers a lab runs: the EndpointSlice
// controllers (slices from selectors; slices mirrored from hand-made Endpoints),
// the Endpoints controller (a cluster's Endpoints objects, which `kubectl get
// ep` and must-gather dumps hold, and import reads),
// the service account controller (the ServiceAccount admission plugin refuses a
// Pod whose namespace has no "default" service account, and this controller makes
// it), and the garbage collector (a deleted Service's slices are removed through
// their owner references, by nobody else).
var DefaultControllers = []string{
	"endpointslice-controller",
	"endpointslice-mirroring-controller",
	"endpoints-controller",
	"serviceaccount-controller",
	"garbage-collector-controller",
}

// ControllerManagerConfig is one lab's controller manager.
type ControllerManagerConfig struct {
	// Netns is the namespace it runs in (the API server's).
	Netns string
	// Kubeconfig is the kubeconfig it reads.
	Kubeconfig string
	// BindAddress is where its secure port listens inside Netns; zero: 127.0.0.1
	// (upstream's default is every address).
	BindAddress netip.Addr
	// Port is its secure port; 0: DefaultControllerManagerPort.
	Port int
	// Controllers are the controllers it runs; nil: DefaultControllers.
	Controllers []string
	// LogFile receives its output.
	LogFile string
	// ExtraArgs are appended to the upstream flags (a later flag wins).
	ExtraArgs []string
	// WaitFor, when set, makes it wait for this file (the kubeconfig) before
	// it runs (WaitForArgs).
	WaitFor string
}

// Args are the svclab-kube arguments that run the controller manager: only the
// given controllers, no leader election (one instance), its own credentials for
// every controller (no per-controller service accounts), and the same kubeconfig
// for checking the tokens of whoever calls its metrics endpoint.
func (c ControllerManagerConfig) Args() []string {
	bind := c.BindAddress
	if !bind.IsValid() {
		bind = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	port := c.Port
	if port == 0 {
		port = DefaultControllerManagerPort
	}
	controllers := c.Controllers
	if controllers == nil {
		controllers = DefaultControllers
	}
	args := []string{
		"kube-controller-manager",
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		// Bearer tokens are checked with a TokenReview; without this the
		// controller manager also looks for client and front-proxy CAs in the
		// extension-apiserver-authentication ConfigMap, which a lab without client
		// certificates lacks, and logs an error on every retry.
		"--authentication-skip-lookup=true",
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=" + bind.String(),
		"--secure-port=" + strconv.Itoa(port),
	}
	return WaitForArgs(c.WaitFor, append(args, c.ExtraArgs...))
}

// StartControllerManager starts the controller manager of c from the component
// binary inside c.Netns.
func StartControllerManager(binary string, c ControllerManagerConfig) (*Process, error) {
	return Start(Command{
		Name: "kube-controller-manager", Netns: c.Netns,
		Path: binary, Args: c.Args(), LogFile: c.LogFile,
	})
}
