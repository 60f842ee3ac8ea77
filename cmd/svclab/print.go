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
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/version"
)

// printLab tells a person what is running and how to get in.
func printLab(w io.Writer, l *lab.Lab, background bool) {
	mode := l.Mode()
	if mode == "" {
		mode = "none"
	}
	fmt.Fprintf(w, "Lab %s is up (mode %s, kube-proxy %s).\n\n", l.ID, mode, l.ProxyConfig().Version)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tKIND\tADDRESS\tNODE\tNETNS")
	var pod, node string
	for _, m := range l.Members() {
		if m.Kind == member.KindFabric {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Name, m.Kind, m.IP, m.Node, m.NetNS)
		if m.Kind == member.KindPod && pod == "" {
			pod = m.Name
		}
		if m.Kind == member.KindNode && node == "" {
			node = m.Name
		}
	}
	tw.Flush()
	ports := l.ServicePorts()
	if len(ports) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVICE\tCLUSTER-IP\tEXTERNAL-IP\tPORT\tNODE-PORT\tENDPOINTS")
		for _, sp := range ports {
			np := "-"
			if sp.NodePort != 0 {
				np = fmt.Sprint(sp.NodePort)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%s\t%s\t%s\n", sp.Name.String(version.Default), sp.ClusterIP, externalList(sp),
				sp.Port, sp.Protocol, np, endpointList(sp.Endpoints))
		}
		tw.Flush()
	}
	ref := l.ID
	fmt.Fprintln(w)
	if kc := l.Kubeconfig(); kc != "" {
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

// externalList is what kubectl shows as EXTERNAL-IP: the load balancer ingress
// IPs, then the external IPs.
func externalList(sp proxy.ServicePort) string {
	var s []string
	for _, a := range append(append([]netip.Addr(nil), sp.LoadBalancerIPs...), sp.ExternalIPs...) {
		s = append(s, a.String())
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

func endpointList(eps []proxy.Endpoint) string {
	if len(eps) == 0 {
		return "<none>"
	}
	s := make([]string, 0, len(eps))
	for _, e := range eps {
		flag := ""
		switch {
		case e.Terminating:
			flag = " (terminating)"
		case !e.Ready:
			flag = " (not ready)"
		}
		s = append(s, e.String()+flag)
	}
	return strings.Join(s, ", ")
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
