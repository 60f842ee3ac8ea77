package importer

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/topology"
)

// checkPorts refuses a Service whose port numbers no cluster could hold,
// naming the input object and the field, before they reach the topology
// (where they would read as a fault of the importer's own file).
func checkPorts(in Object[corev1.Service]) error {
	if len(in.Obj.Spec.Ports) == 0 && in.Obj.Spec.ClusterIP != corev1.ClusterIPNone && in.Obj.Spec.Type != corev1.ServiceTypeExternalName {
		return inputErrorf(in.Where, "spec.ports: required: a Service has at least one port")
	}
	for i, p := range in.Obj.Spec.Ports {
		for _, f := range []struct {
			field    string
			v        int32
			required bool
		}{{"port", p.Port, true}, {"targetPort", p.TargetPort.IntVal, false}, {"nodePort", p.NodePort, false}} {
			if f.v < 0 || f.v > 65535 || f.required && f.v == 0 {
				return inputErrorf(in.Where, "spec.ports[%d].%s: %d is not a port number (1-65535)", i, f.field, f.v)
			}
		}
	}
	if hc := in.Obj.Spec.HealthCheckNodePort; hc < 0 || hc > 65535 {
		return inputErrorf(in.Where, "spec.healthCheckNodePort: %d is not a port number (1-65535)", hc)
	}
	return nil
}

// nodePortRange states the cluster's --service-node-port-range in the file
// when its node ports reach outside the default: a dump does not say the
// range, so the smallest one holding the default and every node port is taken.
func (b *builder) nodePortRange() {
	r := topology.DefaultNodePortRange
	for _, s := range b.res.File.Services {
		ports := []int32{s.Spec.HealthCheckNodePort}
		for _, p := range s.Spec.Ports {
			ports = append(ports, p.NodePort)
		}
		for _, p := range ports {
			if p != 0 {
				r.First, r.Last = min(r.First, p), max(r.Last, p)
			}
		}
	}
	if r != topology.DefaultNodePortRange {
		b.res.File.NodePortRange = r.String()
		b.notef("nodePortRange %s: the cluster's node ports reach outside %s, so its API server has another --service-node-port-range; the range is inferred to hold them (a dump does not state it)", r, topology.DefaultNodePortRange)
	}
}
