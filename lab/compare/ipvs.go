package compare

import (
	"cmp"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/svclab/svclab/lab/differential"
	"github.com/svclab/svclab/lab/proxy/iptables"
)

// Frontends name a node's Service addresses for IPVS's reports: "TCP
// 10.96.0.10:53" (a ClusterIP, external or load balancer IP) and "TCP *:30080"
// (a node port, on every local address) to "default/web:http".
type Frontends map[string]string

// IPVS compares what a node holds in IPVS mode (dump: `ipvsadm -Ln`, `ipset
// save` and iptables-save output, in any order and any of them) with what svclab
// renders for it in IPVS mode (want). Only the parts the dump holds are compared.
func IPVS(want, dump string, names Frontends) (*Report, error) {
	w, d := splitIPVS(want), splitIPVS(dump)
	if err := Check("ipvs", dump); err != nil {
		return nil, err
	}
	c := collector{}
	add := c.add
	// endpoints name each real server's Service, for the hairpin set's members.
	endpoints := map[string]string{}
	if d.ipvsadm != "" {
		a, b := virtualServers(w.ipvsadm), virtualServers(d.ipvsadm)
		for _, vs := range slices.Sorted(maps.Keys(union(a, b))) {
			subject := names.of(vs)
			line := func(rs string) Line { return Line{Table: "ipvs", Chain: vs, Rule: vs + " " + rs} }
			_, inA := a[vs]
			_, inB := b[vs]
			switch {
			case !inA:
				add(subject, Line{Table: "ipvs", Chain: vs, Rule: vs}, false)
			case !inB:
				add(subject, Line{Table: "ipvs", Chain: vs, Rule: vs}, true)
			}
			for _, rs := range slices.Sorted(maps.Keys(union(a[vs], b[vs]))) {
				if a[vs][rs] == b[vs][rs] {
					continue
				}
				ep := "endpoint " + strings.Fields(rs)[0]
				if svc := names.service(vs); svc != "" {
					ep += " of Service " + svc
				}
				endpoints[strings.Fields(rs)[0]] = ep
				if a[vs][rs] {
					add(ep, line(rs), true)
				} else {
					add(ep, line(rs), false)
				}
			}
		}
	}
	if d.ipset != "" {
		a, b := setLines(w.ipset), setLines(d.ipset)
		for _, l := range slices.Sorted(maps.Keys(union(a, b))) {
			if a[l] != b[l] {
				add(names.ofSetLine(l, endpoints), Line{Table: "ipset", Rule: l}, a[l])
			}
		}
	}
	if d.iptables != "" {
		ipt, err := IPTables(w.iptables, d.iptables)
		if err != nil {
			return nil, err
		}
		for _, s := range ipt.Subjects {
			for _, l := range s.Missing {
				add(s.Name, l, true)
			}
			for _, l := range s.Extra {
				add(s.Name, l, false)
			}
			c[s.Name].Same += s.Same
		}
	}
	return &Report{Subjects: c.subjects()}, nil
}

type ipvsParts struct{ ipvsadm, ipset, iptables string }

// splitIPVS tells the three programs' output apart line by line; the iptables
// calls svclab's rendering lists in comments go with the iptables part.
func splitIPVS(text string) ipvsParts {
	var v, s, t strings.Builder
	for _, line := range strings.Split(text, "\n") {
		line = iptables.CutCounters(line)
		trimmed := strings.TrimSpace(line)
		if l, ok := ipvsadmSaved(trimmed); ok {
			v.WriteString(l + "\n")
			continue
		}
		switch {
		case strings.HasPrefix(trimmed, "# iptables") || strings.HasPrefix(line, "#   iptables "):
			t.WriteString(strings.Replace(line, "#   iptables ", "#   ", 1) + "\n")
		case strings.HasPrefix(line, "create ") || strings.HasPrefix(line, "add "):
			s.WriteString(line + "\n")
		case strings.HasPrefix(line, "IP Virtual Server"), strings.HasPrefix(line, "Prot "), strings.HasPrefix(line, "  -> "),
			strings.HasPrefix(line, "TCP "), strings.HasPrefix(line, "UDP "), strings.HasPrefix(line, "SCTP "):
			v.WriteString(line + "\n")
		case strings.HasPrefix(line, "*"), strings.HasPrefix(line, ":"), strings.HasPrefix(line, "-A "), line == "COMMIT":
			t.WriteString(line + "\n")
		}
	}
	return ipvsParts{v.String(), s.String(), t.String()}
}

// virtualServers reads `ipvsadm -Ln` as the differential check normalizes it:
// per virtual server ("TCP 10.96.0.10:53 rr"), its real servers ("10.244.1.5:53
// Masq 1").
func virtualServers(text string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	var cur string
	for _, line := range strings.Split(differential.Normalize([]string{"ipvsadm"}, text), "\n") {
		switch {
		case strings.HasPrefix(line, "  -> ") && cur != "":
			f := strings.Fields(line)
			if len(f) >= 2 && f[1] != "RemoteAddress:Port" {
				out[cur][strings.Join(f[1:], " ")] = true
			}
		case strings.HasPrefix(line, "TCP ") || strings.HasPrefix(line, "UDP ") || strings.HasPrefix(line, "SCTP "):
			cur = line
			out[cur] = map[string]bool{}
		}
	}
	return out
}

// hashTuning is what ipset 7.10 and later print on a hash set's create line
// (its bucket size and hash seed, which the kernel chooses): no part of what
// kube-proxy asks for.
var hashTuning = regexp.MustCompile(` (bucketsize \d+|initval 0x[0-9a-fA-F]+)`)

// setLines are `ipset save`'s lines as the differential check normalizes them.
func setLines(text string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(differential.Normalize([]string{"ipset"}, hashTuning.ReplaceAllString(text, "")), "\n") {
		if l != "" {
			out[l] = true
		}
	}
	return out
}

// service is the Service port of a virtual server line ("TCP 10.96.0.10:53 rr").
func (n Frontends) service(vs string) string {
	f := strings.Fields(vs)
	if len(f) < 2 {
		return ""
	}
	if s, ok := n[f[0]+" "+f[1]]; ok {
		return s
	}
	if _, port, ok := strings.Cut(f[1], ":"); ok {
		return n[f[0]+" *:"+port]
	}
	return ""
}

func (n Frontends) of(vs string) string {
	if s := n.service(vs); s != "" {
		return "Service " + s
	}
	f := strings.Fields(vs)
	return "virtual server " + strings.Join(f[:min(2, len(f))], " ")
}

// ofSetLine names what an `ipset save` line is about: the endpoint of a
// hairpin member (KUBE-LOOP-BACK), the Service of an "ip,proto:port" or port
// member, else the set.
func (n Frontends) ofSetLine(l string, endpoints map[string]string) string {
	f := strings.Fields(l)
	if len(f) < 3 || f[0] != "add" {
		if len(f) >= 2 {
			return "ipset " + f[1]
		}
		return "ipset"
	}
	entry := strings.Split(f[2], ",")
	if f[1] == "KUBE-LOOP-BACK" && len(entry) == 3 {
		_, port, _ := strings.Cut(entry[1], ":")
		ep := entry[0] + ":" + port
		if name, ok := endpoints[ep]; ok {
			return name
		}
		return "endpoint " + ep
	}
	if len(entry) >= 2 {
		if proto, port, ok := strings.Cut(entry[1], ":"); ok {
			if s := n[strings.ToUpper(proto)+" "+entry[0]+":"+port]; s != "" {
				return "Service " + s
			}
		}
	} else if strings.Contains(f[1], "NODE-PORT") {
		proto := "TCP"
		for _, p := range []string{"UDP", "SCTP"} {
			if strings.Contains(f[1], p) {
				proto = p
			}
		}
		if s := n[proto+" *:"+entry[0]]; s != "" {
			return "Service " + s
		}
	}
	return "ipset " + f[1]
}

// ipvsadmSaved is a line of `ipvsadm -Sn` (-A adds a virtual server, -a a real
// server to it) as `ipvsadm -Ln` prints it; ok is false for any other line.
func ipvsadmSaved(line string) (string, bool) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "-A" && f[0] != "-a" {
		return "", false
	}
	proto, ok := map[string]string{"-t": "TCP", "--tcp-service": "TCP", "-u": "UDP", "--udp-service": "UDP", "--sctp-service": "SCTP"}[f[1]]
	if !ok {
		return "", false // an iptables rule: -A CHAIN ...
	}
	opts := map[string]string{}
	for i := 3; i < len(f); i++ {
		switch o := f[i]; o {
		case "-m", "-g", "-i", "--masquerading", "--gatewaying", "--ipip":
			opts["forward"] = map[string]string{"-m": "Masq", "--masquerading": "Masq", "-g": "Route", "--gatewaying": "Route", "-i": "Tunnel", "--ipip": "Tunnel"}[o]
		default:
			if i+1 < len(f) && !strings.HasPrefix(f[i+1], "-") {
				opts[o] = f[i+1]
				i++
			}
		}
	}
	if f[0] == "-A" {
		l := proto + "  " + f[2] + " " + cmp.Or(opts["-s"], opts["--scheduler"], "wlc")
		if p := cmp.Or(opts["-p"], opts["--persistent"]); p != "" {
			l += " persistent " + p
		}
		return l, true
	}
	return "  -> " + cmp.Or(opts["-r"], opts["--real-server"]) + " " + cmp.Or(opts["forward"], "Route") + " " + cmp.Or(opts["-w"], opts["--weight"], "1") + " 0 0", true
}
