// Package kube runs the real Kubernetes components inside a lab's network
// namespaces: kube-apiserver (on an embedded etcd), kube-controller-manager (the
// EndpointSlice controllers), kube-proxy in each node, and CoreDNS, all from one
// binary, svclab-kube, built from the components module of this repository
// (components/, its own go.mod pinning k8s.io/kubernetes at Version).
//
// The package gives the building blocks; a lab composes them:
//
//   - Binary finds or builds svclab-kube. The main module does not depend on the
//     components module (it would pull all of Kubernetes into every svclab build),
//     so the binary is built with the go command on first use, into a cache keyed
//     by Version and a hash of the components' sources, and reused after. Building
//     takes minutes and gigabytes, so it says so, heartbeats while the go command
//     works, and holds a lock so that two runs build once.
//   - NewPKI and WriteKubeconfig make one lab's credentials with Go's crypto
//     libraries: a CA, the API server's serving certificate (every name a client
//     inside the lab dials), a service account key pair, and one admin bearer token
//     in system:masters that kubectl and every component use (the lab tests
//     Services, not authorization; client certificates would add a signing step
//     per component for nothing the lab checks). The kubeconfig is written with a
//     struct of its own rather than client-go's types, which would pull client-go
//     into svclab for one file.
//   - Start runs a component inside a network namespace by forking from a thread
//     switched into it (namespaces.Do): a child inherits its parent thread's
//     namespace, so every socket it opens is in the lab. The same thread waits for
//     the child, so Pdeathsig ends the component when svclab dies and not before;
//     Stop sends SIGTERM, then SIGKILL after a grace period, by pidfd.
//   - The Start* helpers hold each component's flags. Nothing binds in the root
//     namespace, and every listener is set explicitly because upstream defaults
//     bind every address: the API server binds its lab address only (etcd sits
//     behind a Unix socket in the run directory, with no peer listener), the
//     controller manager 127.0.0.1 inside the API server's namespace, kube-proxy
//     its healthz and metrics servers on the node's address, CoreDNS its ports in
//     its pod's namespace.
//   - ProxyConfigYAML writes a KubeProxyConfiguration with the fields a lab decides
//     (mode, clusterCIDR, the node's name and address, conntrack.maxPerCore 0
//     because nf_conntrack_max is read-only in a child namespace, minSyncPeriod when
//     asked) and kube-proxy's defaults otherwise, and merges a user's fragment over
//     it. The fragment is checked against kube-proxy's own configuration type
//     (k8s.io/kube-proxy/config/v1alpha1) strictly: kube-proxy itself decodes a
//     v1alpha1 file leniently, logging and ignoring a misspelt field, so a typo
//     would silently change nothing; here it fails before the lab starts, as
//     file:line: field: what. The type costs the main module component-base's
//     logging and feature-gate packages (and with them prometheus and protobuf):
//     about 80 packages, 6 MB of the svclab binary.
//   - Corefile is kubeadm's Corefile less forward, loop and reload (nothing to
//     forward to, no ConfigMap to reload).
//   - The Wait* helpers tell when a component is ready and how long after its
//     start: the API server's /readyz, kube-proxy's first sync (its sync counter,
//     since its healthz answers 200 from the start), CoreDNS's ready plugin. Their
//     HTTP clients dial from inside the component's namespace (traffic.HTTPClient).
package kube
