package kube

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// DefaultAPIServerPort is the API server's secure port, as kubeadm sets it.
const DefaultAPIServerPort = 6443

// APIServerConfig is one lab's API server.
type APIServerConfig struct {
	// Netns is the namespace it runs in; Address is its address there, which it
	// binds and advertises (the `kubernetes` Service's endpoint).
	Netns   string
	Address netip.Addr
	// Port is its secure port; 0: DefaultAPIServerPort.
	Port int
	// ServiceCIDR is the range ClusterIPs are allocated from.
	ServiceCIDR netip.Prefix
	// NodePortRange is "first-last"; empty: upstream's 30000-32767.
	NodePortRange string
	// ClusterDomain is the Services' DNS domain (in the service account issuer);
	// empty: DefaultClusterDomain.
	ClusterDomain string
	// PKI holds its certificate, keys and token file.
	PKI *PKI
	// Dir receives etcd's data and socket (Dir/etcd).
	Dir string
	// LogFile receives its output (etcd's warnings included).
	LogFile string
	// ExtraArgs are appended to the upstream flags (a later flag wins).
	ExtraArgs []string
}

func (c APIServerConfig) port() int {
	if c.Port == 0 {
		return DefaultAPIServerPort
	}
	return c.Port
}

// URL is the API server's address for clients inside the lab.
func (c APIServerConfig) URL() string {
	return "https://" + netip.AddrPortFrom(c.Address, uint16(c.port())).String()
}

// Args are the svclab-kube arguments that run the API server. It listens only on
// Address:Port (its one listener; etcd is embedded behind a Unix socket);
// authentication is by the static token file, authorization by RBAC (the admin is
// in system:masters); service account tokens are signed with the lab's own key.
func (c APIServerConfig) Args() []string {
	domain := c.ClusterDomain
	if domain == "" {
		domain = DefaultClusterDomain
	}
	args := []string{
		"kube-apiserver",
		"--embedded-etcd-data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--bind-address=" + c.Address.String(),
		"--advertise-address=" + c.Address.String(),
		"--secure-port=" + strconv.Itoa(c.port()),
		"--service-cluster-ip-range=" + c.ServiceCIDR.String(),
		"--tls-cert-file=" + c.PKI.ServerCert,
		"--tls-private-key-file=" + c.PKI.ServerKey,
		// Set although the certificate is given: where a missing one would be
		// generated, never upstream's /var/run/kubernetes.
		"--cert-dir=" + filepath.Join(c.Dir, "certs"),
		"--token-auth-file=" + c.PKI.TokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc." + domain,
		"--service-account-key-file=" + c.PKI.ServiceAccountPub,
		"--service-account-signing-key-file=" + c.PKI.ServiceAccountKey,
	}
	if c.NodePortRange != "" {
		args = append(args, "--service-node-port-range="+c.NodePortRange)
	}
	return append(args, c.ExtraArgs...)
}

// StartAPIServer starts the API server of c from the component binary inside
// c.Netns.
func StartAPIServer(binary string, c APIServerConfig) (*Process, error) {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	return Start(Command{
		Name: "kube-apiserver", Netns: c.Netns,
		Path: binary, Args: c.Args(), LogFile: c.LogFile,
	})
}

// WaitAPIServer waits until the API server answers /readyz with 200 (etcd up,
// every post-start hook done, the `kubernetes` Service made) and returns how long
// after its start that was.
func WaitAPIServer(ctx context.Context, p *Process, c APIServerConfig) (time.Duration, error) {
	client, err := HTTPSClient(c.Netns, c.PKI, 2*time.Second)
	if err != nil {
		return 0, fmt.Errorf("kube-apiserver: %w", err)
	}
	return waitOK(ctx, p, client, c.URL()+"/readyz", c.PKI.AdminToken)
}
