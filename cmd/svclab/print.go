package main

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

// printLab tells a person what is running and how to get in.
func printLab(w io.Writer, l *lab.Lab, background bool) {
	mode := l.Mode()
	if mode == "" {
		mode = "none"
	}
	fmt.Fprintf(w, "Lab %s is up (mode %s, kube-proxy %s).\n\n", l.ID, mode, l.ProxyConfig().Version)
	printMembersAndServices(w, l.Record())
	var pod, node string
	for _, m := range l.Members() {
		if m.Kind == member.KindPod && pod == "" {
			pod = m.Name
		}
		if m.Kind == member.KindNode && node == "" {
			node = m.Name
		}
	}
	ports := l.Proxies().ServicePorts()
	ref := l.ID
	fmt.Fprintln(w)
	if kc := l.ControlPlane().Kubeconfig(); kc != "" {
		fmt.Fprintf(w, "API server:    kubeconfig %s (its server is inside the lab)\n", kc)
		fmt.Fprintf(w, "Use kubectl:   svclab kubectl %s -- get svc\n", ref)
	}
	if node != "" && l.Mode() != "" {
		fmt.Fprintf(w, "Look inside:   svclab rules --lab %s --node %s\n", ref, node)
	}
	if sp, ok := firstLabPort(l.Topology(), ports); ok && pod != "" {
		fmt.Fprintf(w, "Send traffic:  svclab exec %s %s -- curl -s %s\n", ref, pod, netip.AddrPortFrom(sp.ClusterIP, uint16(sp.Port)))
	}
	if background {
		fmt.Fprintf(w, "Tear down:     svclab down %s\n", ref)
	}
}

// printMembersAndServices prints a lab's members and its Services' ports as
// kubectl shows them.
func printMembersAndServices(w io.Writer, r record.Lab) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tKIND\tADDRESS\tNODE\tNETNS")
	for _, m := range r.Members {
		if m.Kind == member.KindFabric {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Name, m.Kind, m.IP, m.Node, m.NetNS)
	}
	tw.Flush()
	if len(r.Services) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tCLUSTER-IP\tEXTERNAL-IP\tPORT\tNODE-PORT\tENDPOINTS")
	for _, sp := range r.Services {
		np := "-"
		if sp.NodePort != 0 {
			np = fmt.Sprint(sp.NodePort)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%s\t%s\t%s\n", sp.Name, sp.ClusterIP, joinOr(sp.External, ",", "-"),
			sp.Port, sp.Protocol, np, joinOr(sp.Endpoints, ", ", "<none>"))
	}
	tw.Flush()
}

// joinOr joins v with sep, or is none when v is empty.
func joinOr(v []string, sep, none string) string {
	if len(v) == 0 {
		return none
	}
	return strings.Join(v, sep)
}

// firstLabPort is the first port of a Service of the topology (not one the API
// server keeps itself, whose endpoint is no lab pod).
func firstLabPort(t *topology.Topology, ports []proxy.ServicePort) (proxy.ServicePort, bool) {
	for _, sp := range ports {
		for _, svc := range t.Services {
			if svc.Namespace == sp.Name.Namespace && svc.Name == sp.Name.Name {
				return sp, true
			}
		}
	}
	return proxy.ServicePort{}, false
}
