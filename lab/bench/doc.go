// Package bench is `svclab bench`: what a Service change costs to reach the
// kernel and the wire, and what each proxy mode costs per connection, measured
// on a real kernel as the number of Services grows.
//
// One lab node (built with lab.Up: a node namespace, a client pod and two backend
// pods) is programmed with N synthetic ClusterIP Services of E endpoints each,
// by svclab's own proxiers: iptables with every apply method (full, partial,
// changed, per-rule) and both backends, and any other registered mode (IPVS,
// whose method is netlink). For each size it measures
//
//   - the cold sync (N Services from empty), beside a bare iptables-restore of
//     the same input to show svclab's own overhead;
//   - adding one Service and changing one Service's endpoints with N present:
//     the Sync call, and the network-programming latency, from the start of the
//     update to the first TCP connection through the changed Service that
//     succeeds, polled every millisecond from the client pod;
//   - the TCP handshake from the client pod to the first and the last Service in
//     the table and, without NAT, to a pod;
//   - rule counts (generated, and read back from the kernel) and the kernel
//     memory they take.
//
// Run returns a Report, whose Write puts results.csv (a row per measurement),
// machine.json, summary.md and plots/*.png in a directory; Combine writes the
// page that joins a run in svclab's VM with one on the host. Timings are never
// thresholds: CheckOutput checks a report directory's shape only.
package bench
