package trace

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints t as svclab trace does: each namespace the packet crossed,
// the hooks and the rules that matched in each (as the mode writes them,
// comments included), the route, the conntrack entry and IPVS's choice, then
// how the flow ended.
func (t *Trace) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s %s %s -> %s (lab %s, mode %s)\n", t.Protocol, t.From, t.Source, t.To, t.Lab, t.Mode)
	fmt.Fprintf(w, "rules read by %s\n", t.Method)
	for i, h := range t.Hops {
		fmt.Fprintf(w, "\n[%d] %s (%s)\n", i+1, h.Member, h.Kind)
		for _, k := range h.Hooks {
			fmt.Fprintf(w, "  %s %s: %s\n", k.Table, k.Chain, k.Packet)
			for _, r := range k.Rules {
				fmt.Fprintf(w, "    %s", r.Text)
				if !strings.HasPrefix(r.Text, "-A ") {
					fmt.Fprintf(w, "  [chain %s]", r.Chain)
				}
				fmt.Fprintf(w, "  => %s\n", r.Verdict)
			}
			if k.Verdict != "" && (len(k.Rules) == 0 || k.Rules[len(k.Rules)-1].Verdict != k.Verdict) {
				fmt.Fprintf(w, "    => %s\n", k.Verdict)
			}
		}
		if len(h.Counters) > 0 {
			fmt.Fprintln(w, "  rules whose counters grew, by hook (every packet of the flow counts):")
			for _, r := range h.Counters {
				fmt.Fprintf(w, "    %s [+%d] %s\n", r.Table, r.Packets, r.Text)
			}
		}
		for _, c := range h.IPVS {
			fmt.Fprintf(w, "  ipvs: %s\n", c)
		}
		if h.IPVSEmpty != "" {
			fmt.Fprintf(w, "  ipvs: virtual service %s has no real server\n", h.IPVSEmpty)
		}
		if h.Route != "" {
			fmt.Fprintf(w, "  route: %s\n", h.Route)
		}
		if c := h.Conntrack; c != nil {
			fmt.Fprintf(w, "  conntrack: original %s -> %s, reply %s -> %s", c.Original.Src, c.Original.Dst, c.Reply.Src, c.Reply.Dst)
			if c.State != "" {
				fmt.Fprintf(w, " %s", c.State)
			}
			fmt.Fprintln(w)
			if c.DNAT != "" {
				fmt.Fprintf(w, "    DNAT %s\n", c.DNAT)
			}
			if c.SNAT != "" {
				fmt.Fprintf(w, "    SNAT %s\n", c.SNAT)
			}
		}
	}
	fmt.Fprintf(w, "\n%s\n", t.End)
}

func (e End) String() string {
	switch e.Outcome {
	case Answered:
		return fmt.Sprintf("answered by %s (%s), which saw the source %s", e.Pod, e.Backend, e.Seen)
	case "":
		return "not traced"
	}
	s := e.Outcome
	if e.By != "" {
		s += " by " + e.By
	}
	if e.Member != "" {
		s += " in " + e.Member
	}
	if e.Rule != nil {
		s += fmt.Sprintf(": %s %s: %s", e.Rule.Table, e.Rule.Chain, e.Rule.Text)
	}
	if e.Error != "" {
		s += fmt.Sprintf("\n(the client: %s)", e.Error)
	}
	return s
}
