package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/trace"
)

func newTraceCommand() *cobra.Command {
	var (
		f       labFlags
		udp     bool
		asJSON  bool
		srcPort uint16
	)
	cmd := &cobra.Command{
		Use:   "trace LAB FROM DEST:PORT | trace [-f FILE] [--mode MODE] FROM DEST:PORT",
		Short: "Follow one real connection through a lab: every namespace, hook, rule, route and conntrack entry",
		Long: `Make one real TCP connection (or, with --udp, one datagram) from the lab member FROM to
DEST:PORT and print, for every network namespace it crossed in order, the netfilter hooks
and rules that matched (chain, table, verdict; rules as the mode writes them, comments
shown), the route taken, the conntrack entry it made (original and reply tuples: the DNAT
and SNAT as the kernel recorded them), IPVS's choice in IPVS mode, and how it ended:
answered by which pod seeing which source, refused (by a REJECT rule, or no listener), or
dropped (the last rule seen).

nf_tables rules are read from the kernel's trace events (nft monitor trace for nftables
mode, xtables-monitor --trace for iptables-nft); iptables-legacy rules from per-rule
counter deltas, which need an otherwise quiet lab. The trace's temporary table is removed
afterwards; what a killed trace left (its tables, any monitor still running) is removed by
the next trace on the lab, svclab down and svclab clean, which say so. In IPVS mode a flow
whose reply a node's older IPVS connection took (same client address and port, same real
server) ends naming that connection.

With three arguments it traces in the running lab LAB; with two it builds a throwaway lab
from -f (default: the built-in web.yaml) with the lab flags, traces, and tears it down.`,
		Example: `  svclab trace web-x6wr client 10.96.123.45:80
  svclab trace -f httpd --kube-proxy-version 1.18 busybox 10.96.0.100:80
  svclab trace --proxy kube-proxy --mode nftables client 10.96.123.45:80 --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			return usage(cobra.RangeArgs(2, 3)(cmd, args))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dest, err := netip.ParseAddrPort(args[len(args)-1])
			if err != nil {
				return usage(fmt.Errorf("DEST:PORT %q: %w", args[len(args)-1], err))
			}
			req := trace.Request{From: args[len(args)-2], To: dest, Protocol: "TCP", SrcPort: srcPort}
			if udp {
				req.Protocol = "UDP"
			}
			if len(args) == 3 && cmd.Flags().NFlag() > countFlags(cmd, "udp", "json", "source-port") {
				return usage(errors.New("a running lab (LAB FROM DEST:PORT) is traced as it is: the lab flags are for a throwaway lab (FROM DEST:PORT)"))
			}
			running := ""
			if len(args) == 3 {
				running = args[0]
			}
			if err := privileged(running); err != nil {
				return err
			}
			// A throwaway lab taken down under the trace (svclab down,
			// clean --all) says so, as verify's does.
			ctx, stop := ownerContext("trace", record.DefaultDir, cmd.ErrOrStderr())
			defer stop()
			var t *trace.Trace
			if len(args) == 3 {
				r, err := record.Find(record.DefaultDir, args[0])
				if err != nil {
					return usage(err)
				}
				// What an earlier trace on this lab left when it was killed
				// (its tables would stay in every namespace).
				k, err := record.RemoveKilledTraces(record.DefaultDir, r.ID)
				if k.Removed() {
					fmt.Fprintln(cmd.ErrOrStderr(), k)
				}
				if err != nil {
					return err
				}
				// A lab taken down under the trace says so (and who took it).
				err = againstLab(ctx, r, "trace", func(ctx context.Context) (err error) {
					t, err = trace.Run(ctx, trace.FromRecord(*r), req)
					return err
				})
				if errors.Is(err, trace.ErrNoMember) {
					return usage(err)
				} else if err != nil {
					return err
				}
			} else {
				if t, err = traceThrowaway(ctx, f, req); err != nil {
					return vanishedOr(ctx, err)
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false) // packets read "a > b"
				return enc.Encode(t)
			}
			t.WriteText(cmd.OutOrStdout())
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&udp, "udp", false, "send one UDP datagram instead of a TCP connection")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the trace as JSON")
	cmd.Flags().Uint16Var(&srcPort, "source-port", 0, "send from this source port, to replay a client's flow (conntrack and IPVS keep state by it); default: a random one of 20000-29999, below the ephemeral range")
	return cmd
}

// countFlags is how many of the named flags were given.
func countFlags(cmd *cobra.Command, names ...string) int {
	n := 0
	for _, name := range names {
		if cmd.Flags().Changed(name) {
			n++
		}
	}
	return n
}

// traceThrowaway builds the lab the flags describe, traces req in it and tears
// it down.
func traceThrowaway(ctx context.Context, f labFlags, req trace.Request) (*trace.Trace, error) {
	t, o, err := f.load()
	if err != nil {
		return nil, err
	}
	l, err := lab.Up(ctx, t, o)
	if err != nil {
		return nil, err
	}
	tr, err := trace.Run(ctx, trace.FromRecord(l.Record()), req)
	if errors.Is(err, trace.ErrNoMember) {
		err = usage(err)
	}
	return tr, errors.Join(err, l.Down())
}
