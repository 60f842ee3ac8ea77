package topology

import (
	"testing"
)

// TestKubectlPaste checks that a Service as `kubectl get svc -o yaml` prints it,
// server-side fields and all, is accepted as it is.
func TestKubectlPaste(t *testing.T) {
	top := mustParse(t, oneNode+`
pods:
  - {name: web-a, node: node-1, labels: {app: web, canary: on, tier: yes}}
services:
- apiVersion: v1
  kind: Service
  metadata:
    annotations:
      kubectl.kubernetes.io/last-applied-configuration: |
        {"apiVersion":"v1","kind":"Service","metadata":{"annotations":{},"name":"web","namespace":"default"}}
    creationTimestamp: "2025-03-01T10:00:00Z"
    labels:
      app: web
    managedFields:
    - apiVersion: v1
      fieldsType: FieldsV1
      fieldsV1:
        f:spec:
          f:ports:
            .: {}
            k:{"port":80,"protocol":"TCP"}:
              .: {}
              f:port: {}
      manager: kubectl-client-side-apply
      operation: Update
      time: "2025-03-01T10:00:00Z"
    name: web
    namespace: default
    resourceVersion: "1234"
    uid: 5f0b6c1e-8d2a-4c51-9a7e-3f1b2c4d5e6f
  spec:
    clusterIP: 10.96.0.80
    clusterIPs:
    - 10.96.0.80
    externalTrafficPolicy: Cluster
    internalTrafficPolicy: Cluster
    ipFamilies:
    - IPv4
    ipFamilyPolicy: SingleStack
    ports:
    - nodePort: 31080
      port: 80
      protocol: TCP
      targetPort: 8080
    selector:
      app: web
    sessionAffinity: None
    type: NodePort
  status:
    loadBalancer: {}
`)
	svc := mustService(t, top, "web")
	if svc.Spec.ClusterIP != "10.96.0.80" || svc.Spec.Ports[0].NodePort != 31080 || string(svc.UID) != "5f0b6c1e-8d2a-4c51-9a7e-3f1b2c4d5e6f" {
		t.Errorf("pasted Service: %+v", svc.Spec)
	}
	// YAML 1.2 reads on and yes as the strings a label needs, not as booleans.
	if p, _ := top.Pod("default/web-a"); p.Labels["canary"] != "on" || p.Labels["tier"] != "yes" {
		t.Errorf("labels %v", p.Labels)
	}
	if sl := slicesOf(top, "web"); len(sl) != 1 || sl[0].OwnerReferences[0].UID != svc.UID {
		t.Errorf("slice owner %+v", sl[0].OwnerReferences)
	}
}
