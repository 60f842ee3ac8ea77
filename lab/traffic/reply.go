// Package traffic is svclab's real traffic: servers in pod namespaces whose replies
// name the backend and the client address it saw, and clients that dial from any
// lab member with deadlines and an optional fixed source port. Sockets are opened
// inside a member's namespace and then used from ordinary goroutines.
package traffic

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// Reply is what every pod server answers: who answered, and whom it saw.
type Reply struct {
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	Node      string `json:"node"`
	// Addr is the backend's own address and port (the targetPort after DNAT).
	Addr     netip.AddrPort `json:"addr"`
	Protocol string         `json:"protocol"`
	// Client is the source address and port as the pod saw them: after any SNAT.
	Client netip.AddrPort `json:"client"`
}

// Backend is "ip:port" of the answering pod, the form endpoints are written in.
func (r Reply) Backend() string { return r.Addr.String() }

func (r Reply) String() string {
	return fmt.Sprintf("%s (%s on %s) saw %s", r.Pod, r.Addr, r.Node, r.Client)
}

// Identity is what a pod server says about itself.
type Identity struct {
	Pod, Namespace, Node string
	IP                   netip.Addr
	// IP6 is the pod's IPv6 address in a dual-stack lab: when valid, the
	// server answers over IPv6 too, and names it in the replies it sends
	// over IPv6.
	IP6 netip.Addr
}

// reply is the line answering a client at remote on the server's socket at
// local (a wildcard for UDP). Addresses are written as net.JoinHostPort
// writes them: "10.244.2.10:8080", "[fd00:10:244:2::10]:8080".
func (id Identity) reply(proto string, local, remote netip.AddrPort) []byte {
	b, _ := json.Marshal(Reply{
		Pod: id.Pod, Namespace: id.Namespace, Node: id.Node,
		Addr: netip.AddrPortFrom(id.self(local.Addr()), local.Port()), Protocol: proto,
		Client: netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port()),
	})
	return append(b, '\n')
}

// self is the address a reply names as the server's own, for a socket bound
// to local: the pod's address of local's family, whatever local address the
// client reached (a wildcard, the node's cni0 address), as before IPv6.
func (id Identity) self(local netip.Addr) netip.Addr {
	if family(local) == "6" {
		return id.IP6
	}
	return id.IP
}

func parseReply(line []byte) (Reply, error) {
	var r Reply
	if err := json.Unmarshal(line, &r); err != nil {
		return Reply{}, fmt.Errorf("reply %q: %w", truncate(line, 80), err)
	}
	return r, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
