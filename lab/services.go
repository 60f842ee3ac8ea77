package lab

import (
	"fmt"
	"net/netip"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/version"
)

// ServiceRecords are ports as a person reads them: kubectl's names and columns,
// each endpoint marked when it is terminating or not ready.
func ServiceRecords(ports []proxy.ServicePort) []record.Service {
	recs := make([]record.Service, 0, len(ports))
	for _, sp := range ports {
		r := record.Service{Name: sp.Name.String(version.Default), ClusterIP: sp.ClusterIP.String(), Port: sp.Port,
			Protocol: string(sp.Protocol), NodePort: sp.NodePort, Endpoints: []string{}}
		for _, a := range append(append([]netip.Addr(nil), sp.LoadBalancerIPs...), sp.ExternalIPs...) {
			r.External = append(r.External, a.String())
		}
		for _, e := range sp.Endpoints {
			r.Endpoints = append(r.Endpoints, endpointString(e))
		}
		recs = append(recs, r)
	}
	return recs
}

func endpointString(e proxy.Endpoint) string {
	switch {
	case e.Terminating:
		return fmt.Sprintf("%s (terminating)", e)
	case !e.Ready:
		return fmt.Sprintf("%s (not ready)", e)
	}
	return e.String()
}

// Record is what the lab has written about itself.
func (l *Lab) Record() record.Lab { return l.ledger.record() }
