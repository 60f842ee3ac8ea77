// Package bench is `svclab bench`'s measuring: what a Service change costs to
// reach the kernel and the wire, and what each proxy mode costs per
// connection, measured on a real kernel as the number of Services grows.
// Package report turns what it measured into files, tables and plots.
//
// What it measures it asks the registry (proxy.Mode), naming no mode: every
// mode with a proxier of its own, in each of its variants (iptables: the nft
// and legacy backends) and with each of its methods (iptables: partial, full,
// changed, per-rule; IPVS: netlink). One lab node (built with lab.Up: a node
// namespace, a client pod and two backend pods) is programmed with N synthetic
// ClusterIP Services of E endpoints each, by svclab's own proxiers. For each
// size it measures
//
//   - the cold sync (N Services from empty), once for the methods that write
//     the whole table at once, which the others then restart over, and once
//     for each method that writes rule by rule (Mode.PerRule); beside it, when
//     the proxier offers one (proxy.BareApplier), a bare apply of the same
//     rules by the mode's own program, to show svclab's own overhead;
//   - adding one Service and changing one Service's endpoints with N present:
//     the Sync call, and the network-programming latency, from the start of the
//     update to the first TCP connection through the changed Service that
//     succeeds, polled every millisecond from the client pod;
//   - the TCP handshake from the client pod to the first and the last Service in
//     the table and, without NAT, to a pod;
//   - what each proxier reports of its syncs (proxy.StatsReporter: the parts of
//     its time, counts), what the kernel holds after the cold sync
//     (proxy.KernelCounter) and the kernel memory it takes.
//
// Run returns a Report of Rows (see Row for the metrics) and notes on what was
// cut short: caps, budgets and a deadline bound the run, and predictions from
// the smaller sizes (and proxy.SyncEstimator, for syncs that cannot be
// stopped) decide ahead what would not fit. Timings are never thresholds.
package bench
