// Package ipvs is kube-proxy's IPVS mode in svclab: NewPlan computes what kube-proxy
// 1.37's syncProxyRules installs on a node, a Proxier installs it into the node's
// network namespace, and Render prints it. The mode registers itself as "ipvs".
//
// # What is reproduced (pkg/proxy/ipvs of kube-proxy 1.37.2, read for facts)
//
//   - A dummy link kube-ipvs0, left down, holding every ClusterIP as a /32, so the
//     node takes packets to them; addresses no Service needs any more are removed.
//   - A virtual server per ClusterIP:port, per external IP:port and load balancer
//     ingress IP:port (bound to kube-ipvs0 as ClusterIPs are, unless the node
//     holds the address), and per node address:nodePort, the node
//     addresses being every local IPv4 address but loopback and kube-ipvs0's
//     (nodePortAddresses unset): eth0's node IP and cni0's address in a lab. The
//     scheduler is Options.Scheduler (rr by default; wrr, lc, wlc, sh, dh, sed, nq
//     and mh, which gets kube-proxy's source-hash flag). ClientIP affinity is
//     persistence with the affinity timeout.
//   - Real servers with Masq forwarding and weight 1: kube-proxy's syncEndpoint
//     choice, through proxy.Categorize: the cluster endpoints (ready ones, else
//     serving terminating ones); with a Local policy the node's local endpoints,
//     or the cluster endpoints when it has none (kubernetes#97081). A Service
//     without endpoints keeps its virtual servers, without real servers: IPVS
//     answers ICMP port unreachable. There are no REJECT rules for them.
//   - Graceful termination: a TCP real server that is no longer wanted and still
//     has connections gets weight 0 and is deleted once it has none (see
//     graceful.go and DrainInterval); UDP and SCTP ones are deleted at once.
//   - The 17 ipsets kube-proxy creates and fills (KUBE-CLUSTER-IP,
//     KUBE-LOOP-BACK, KUBE-NODE-PORT-{TCP,UDP}, KUBE-NODE-PORT-LOCAL-*,
//     KUBE-HEALTH-CHECK-NODE-PORT, KUBE-IPVS-IPS, ...), diffed against the kernel's
//     entries, and its iptables rules: the jumps and chains ensured with single
//     iptables calls, then one iptables-restore --noflush of KUBE-SERVICES,
//     KUBE-POSTROUTING, KUBE-NODE-PORT, KUBE-LOAD-BALANCER, KUBE-MARK-MASQ,
//     KUBE-FORWARD, KUBE-IPVS-FILTER and the others, on every sync, with either
//     iptables backend (Options.Backend).
//   - The sysctls kube-proxy sets, in the node's namespace: net.ipv4.vs.conntrack,
//     expire_nodest_conn, expire_quiescent_template, ip_forward, and
//     conn_reuse_mode=0 only on kernels 4.1 to 5.8.
//   - After each sync that changed a UDP Service's endpoints, the stale UDP
//     conntrack cleanup (proxy.CleanStaleUDPConntrack) unless
//     Options.NoConntrackCleanup.
//
// Sync follows syncProxyRules' order and its incremental way: each virtual server
// is read back from the kernel and created or updated only if it differs, its real
// servers are listed and only the difference is added, drained or deleted, one
// netlink call at a time; leftover virtual servers are deleted at the end. Nothing
// is rebuilt. SyncStats counts the netlink requests and iptables programs.
//
// # What differs from kube-proxy
//
//   - ipsets are written over netlink (nfnetlink), not with the ipset program;
//     their contents are the same.
//   - Draining real servers are checked every second rather than every minute.
//   - External IPs and load balancer IPs follow the external policy, with the
//     sets kube-proxy fills for them (KUBE-EXTERNAL-IP, -LOCAL,
//     KUBE-LOAD-BALANCER, -LOCAL, -FW, -SOURCE-CIDR, -SOURCE-IP), its rules for
//     them (the physdev and local-destination ACCEPTs of external IPs,
//     KUBE-LOAD-BALANCER's masquerade, the source range firewall) and its
//     KUBE-IPVS-OUT-FILTER rule for a node outside a load balancer's ranges.
//   - Not modelled: strictARP, IPVS timeouts (ipvsadm --set), --ipvs-exclude-cidrs, IPv6,
//     topology hints, and the sync loop's rate limits: the lab calls Sync.
//   - Only kube-proxy 1.37's layout is reproduced; other versions are refused.
package ipvs
