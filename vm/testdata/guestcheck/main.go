// Command guestcheck runs inside svclab's VM during vm's tests. It asks the
// guest's kernel and tools for what svclab's IPVS and iptables modes need, prints
// one line per check on stdout, reports its own details on stderr, writes a
// result file to /out, and exits 0 only if every check passed.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

type check struct {
	name string
	args []string
	want string // a substring the output must hold, if set
}

func checks() []check {
	cs := []check{
		{name: "ip_vs in /proc", args: []string{"cat", "/proc/net/ip_vs"}, want: "LocalAddress:Port"},
		{name: "ipvsadm add service", args: []string{"ipvsadm", "-A", "-t", "10.0.0.1:80", "-s", "rr"}},
		{name: "ipvsadm add real server", args: []string{"ipvsadm", "-a", "-t", "10.0.0.1:80", "-r", "10.0.1.1:8080", "-m"}},
		{name: "ipvsadm list", args: []string{"ipvsadm", "-Ln"}, want: "10.0.0.1:80 rr"},
		{name: "ipset create", args: []string{"ipset", "create", "x", "hash:ip"}},
		{name: "ipset add", args: []string{"ipset", "add", "x", "10.0.0.2"}},
		{name: "ipset test", args: []string{"ipset", "test", "x", "10.0.0.2"}},
		{name: "ipset kube type", args: []string{"ipset", "create", "KUBE-CLUSTER-IP", "hash:ip,port"}},
		{name: "dummy link", args: []string{"/usr/bin/ip", "link", "add", "kube-ipvs0", "type", "dummy"}},
		{name: "netns", args: []string{"/usr/bin/ip", "netns", "add", "guestcheck"}},
		{name: "conntrack list", args: []string{"conntrack", "-L"}},
		// What kube-proxy's nftables mode writes: a numgen DNAT map, a fib match.
		{name: "nft numgen dnat", args: []string{"nft", "add table ip guestcheck; " +
			"add chain ip guestcheck services { type nat hook prerouting priority -100 ; }; " +
			"add rule ip guestcheck services fib daddr type local meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.1.1 . 80 , 1 : 10.0.1.2 . 80 }"}},
		{name: "nft list json", args: []string{"nft", "-j", "list", "table", "ip", "guestcheck"}, want: `"numgen"`},
	}
	for _, b := range []string{"nft", "legacy"} {
		ipt := "iptables-" + b
		cs = append(cs,
			check{name: b + " new chain", args: []string{ipt, "-t", "nat", "-N", "SVCLAB-TEST"}},
			check{name: b + " statistic+comment", args: []string{ipt, "-t", "nat", "-A", "SVCLAB-TEST",
				"-m", "comment", "--comment", "svc/x:http", "-m", "statistic", "--mode", "random",
				"--probability", "0.5", "-j", "RETURN"}},
			check{name: b + " recent", args: []string{ipt, "-t", "nat", "-A", "SVCLAB-TEST",
				"-m", "recent", "--name", "affinity", "--rcheck", "--seconds", "10800", "--reap", "-j", "RETURN"}},
			check{name: b + " addrtype", args: []string{ipt, "-t", "nat", "-A", "SVCLAB-TEST",
				"-m", "addrtype", "--dst-type", "LOCAL", "-p", "tcp", "--dport", "http", "-j", "RETURN"}},
			check{name: b + " masquerade random-fully", args: []string{ipt, "-t", "nat", "-A", "POSTROUTING",
				"-j", "MASQUERADE", "--random-fully"}},
			check{name: b + " ctstate INVALID", args: []string{ipt, "-t", "filter", "-A", "INPUT",
				"-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP"}},
			check{name: b + " save", args: []string{ipt + "-save"}, want: "--random-fully"},
		)
	}
	return cs
}

func main() {
	failed := 0
	for _, c := range checks() {
		out, err := exec.Command(c.args[0], c.args[1:]...).CombinedOutput()
		switch {
		case err != nil:
			failed++
			fmt.Printf("FAIL %s: %v\n", c.name, err)
			fmt.Fprintf(os.Stderr, "%s: %s\n", strings.Join(c.args, " "), out)
		case c.want != "" && !strings.Contains(string(out), c.want):
			failed++
			fmt.Printf("FAIL %s: output lacks %q\n", c.name, c.want)
			fmt.Fprintf(os.Stderr, "%s: %s\n", strings.Join(c.args, " "), out)
		default:
			fmt.Printf("ok %s\n", c.name)
		}
	}
	// What the host passed in: a file, an environment variable, the directory.
	input, err := os.ReadFile("data/input.txt")
	if err != nil {
		failed++
		fmt.Printf("FAIL read data/input.txt: %v\n", err)
	}
	wd, _ := os.Getwd()
	fmt.Printf("input=%s token=%s wd=%s\n", strings.TrimSpace(string(input)), os.Getenv("GUESTCHECK_TOKEN"), wd)
	fmt.Fprintln(os.Stderr, "guestcheck: this line goes to stderr only")
	if err := os.WriteFile("/out/result.txt", []byte(fmt.Sprintf("failed=%d\n", failed)), 0o644); err != nil {
		fmt.Printf("FAIL write /out/result.txt: %v\n", err)
		failed++
	}
	if failed > 0 {
		os.Exit(1)
	}
}
