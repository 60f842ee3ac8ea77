// Package iptables is kube-proxy's iptables mode in svclab: Generate computes the
// rules kube-proxy writes for a node, a Proxier writes them into the node's network
// namespace (iptables-restore, or one iptables call per rule for comparison) and
// Render prints them. The mode registers itself as "iptables".
//
// # Which kube-proxy
//
// Rules are reproduced word for word, as kube-proxy writes them into
// iptables-restore (not as iptables-save prints them back: "-d 10.96.0.10" stays
// without "/32", the mark stays "0x00004000", the MASQUERADE rule's comment keeps
// its quotes), for the features svclab models: ClusterIP, NodePort, TCP, UDP and
// SCTP ports, externalTrafficPolicy and internalTrafficPolicy, ClientIP affinity,
// health check node ports, terminating endpoints, external IPs, load balancer
// IPs and their loadBalancerSourceRanges (KUBE-FW- chains, KUBE-PROXY-FIREWALL;
// from 1.24 on only), --masquerade-all, the local-traffic detectors (ClusterCIDR
// for every release; NodeCIDR, BridgeInterface, InterfaceNamePrefix and none from
// 1.24 on), the default masquerade bit 14, localhost NodePorts on or (1.27 and
// later) off, and nodePortAddresses unset, for either IP family: a proxier
// with proxy.Config.Family IPv6 writes what kube-proxy's IPv6 proxier writes
// with ip6tables (for 1.27 and later; its differences from IPv4, read from
// 1.37.2's syncProxyRules, are listed at generateCurrent); a dual-stack node
// takes one proxier per family, as kube-proxy's meta-proxier holds two.
// Topology hints are not modelled. The order of rules within a
// chain is kube-proxy's; Services are taken in the order kube-proxy's own tests
// sort them by (kube-proxy itself walks a Go map) and chains are listed in that
// order too (KUBE-NODEPORTS, KUBE-SERVICES, other KUBE- chains by name).
//
// Exact, checked against kube-proxy's source of each release:
//
//   - 1.27 to 1.37: the current layout (KUBE-SVC-, KUBE-SVL-, KUBE-EXT-, KUBE-SEP-;
//     filter KUBE-PROXY-FIREWALL, KUBE-NODEPORTS, KUBE-FIREWALL's localnet rule),
//     following 1.37.2. Differences between these releases that svclab reproduces:
//     the nfacct matches of 1.31 and later (written only when the counters could be
//     created in the node, as kube-proxy does), the INVALID drop left out when
//     nf_conntrack_tcp_be_liberal is set (1.29 and later), jumps ensured on every
//     sync before 1.28 and on full syncs since, partial sync as the default from
//     1.27 (beta, on by default; GA in 1.28), an hourly full resync from 1.33,
//     skipped in large clusters from 1.36. Their rule text is otherwise identical. For 1.37 the
//     rules were also compared once, by hand during development, with kube-proxy
//     1.37.2's own syncProxyRules (run on its fake iptables) over 3000 random
//     states covering every policy, affinity, terminating and not-serving
//     endpoints, UDP, multi-port Services and large cluster mode: identical, and
//     so were the chains its partial sync rewrites and the conntrack entries its
//     cleanup picks. That harness builds kube-proxy's own package, so it is not in
//     this repository and CI does not repeat it; the golden files and the specs
//     are what CI checks.
//   - 1.18 and 1.19: the old layout (KUBE-SVC- with the ClusterIP's masquerade rule
//     in KUBE-SERVICES, KUBE-NODEPORTS marking for masquerade, KUBE-XLB- for
//     externalTrafficPolicy Local jumping to the kubelet's KUBE-MARK-DROP when
//     there is no local endpoint; "/32" on addresses; two KUBE-FORWARD conntrack
//     rules), following 1.18.20, with the kubelet's KUBE-MARK-DROP and KUBE-FIREWALL
//     (syncNetworkUtil of kubelet 1.18.20) as setup steps. The two releases differ in
//     the name of an unnamed port: "default/service-httpd:" before 1.19 (the
//     hashes and comments of seed 002), "default/service-httpd" since, which
//     proxy.ServicePortName.String does. internalTrafficPolicy did not exist yet and
//     is ignored; only ready endpoints are used, as then.
//
// Approximate (the nearest exact layout, with the differences listed applied;
// others remain):
//
//   - 1.24 to 1.26 use the current layout. Not reproduced: 1.24 dropped traffic by
//     jumping to the kubelet's KUBE-MARK-DROP and had no KUBE-PROXY-FIREWALL; up to
//     1.26 the kubelet, not kube-proxy, owned KUBE-FIREWALL (with a drop-mark rule).
//   - 1.11 to 1.17 and 1.20 to 1.23 use the old layout. Applied: per-endpoint
//     comments missing in 1.12 to 1.17 (a bug), probabilities with five decimals up
//     to 1.16, no --random-fully before 1.16, no canary chains before 1.17. Not
//     reproduced: the jumps of 1.11 and 1.12 (fewer), the health check ACCEPT rule
//     of 1.21, the masquerade rule moving into KUBE-SVC- in 1.22, terminating
//     endpoints for Local policy (1.22, behind a gate), "/32" dropped and the
//     KUBE-FORWARD conntrack rules merged in 1.23, and the sockets kube-proxy up to
//     1.20 held open on every NodePort.
//
// Outside the rules, the proxier does what kube-proxy does around them: it sets
// route_localnet=1 in the node (localhost NodePorts), sets the conntrack sysctls
// of kube-proxy's conntrack section and then reads nf_conntrack_tcp_be_liberal there, creates the nfacct counters (1.31 and later)
// and the KUBE-PROXY-CANARY chains (1.17 and later, which kube-proxy watches to
// notice a flush; svclab does not watch them), ensures the jumps from the built-in
// chains, looks for stale per-Service chains with iptables-save of nat (in large
// clusters at most every 30 s, as kube-proxy since 1.25), and after a sync that
// changed the endpoints of a UDP Service deletes the stale UDP conntrack entries
// (proxy.CleanStaleUDPConntrack). kube-proxy's sync loop, its rate limits and its
// canary watch are not reproduced: the lab calls Sync.
package iptables
