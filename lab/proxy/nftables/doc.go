// Package nftables registers kube-proxy's nftables mode ("nftables"), which svclab
// has no proxier of its own for: the real kube-proxy programs it. What the mode
// gives the lab is the rest of a mode: whether this machine can run it
// (Available: the nft program, nf_tables, kernel 5.13 or later), what to dump
// when a check fails, and Read, which reads `nft -j list table ip kube-proxy`
// back into a proxy.ServiceMap.
//
// # The layout Read follows (pkg/proxy/nftables of kube-proxy 1.37.2, read for facts)
//
// One table, ip kube-proxy. Its chain services dispatches through two verdict
// maps: service-ips (ClusterIP . protocol . port, and external and load balancer
// IPs) and service-nodeports (protocol . port, for packets to a local address
// other than 127.0.0.0/8), each element a goto to a per-Service chain:
// service-HASH-ns/name/proto/port (policy Cluster), local-... (policy Local) or
// external-... (NodePort and external traffic: a masquerade mark for policy
// Cluster, then a goto to the policy chain; for policy Local first the
// short-circuits of pod and node traffic to the cluster chain). A policy chain
// DNATs: to its one endpoint (`dnat to IP:PORT`), or to one of several
// (`dnat ip addr . port to numgen random mod N map { 0 : IP . PORT, ... }`), or,
// with ClientIP affinity, through endpoint-... chains (`ip saddr @affinity-...
// goto endpoint-...` per endpoint, then `numgen random mod N vmap { 0 : goto
// endpoint-..., ... }`), each of which updates its affinity set (whose timeout is
// the affinity timeout) and DNATs. Frontends without usable endpoints are in the
// filter side's maps no-endpoint-services and no-endpoint-nodeports instead,
// mapped to drop (a Local policy with no local endpoint) or goto reject-chain.
//
// Chains of deleted Services stay flushed for a second before kube-proxy deletes
// them; no map points at them, so Read never meets them.
package nftables
