package main

import (
	"strings"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins of kubeadm's Corefile that a lab without upstream DNS uses
	// (forward, loop and reload are left out: there is nothing to forward to, so
	// nothing to loop through, and no ConfigMap to reload from), plus log for
	// query logging when a lab asks for it.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the linked plugins in the order CoreDNS chains them: the
// relative order of upstream's core/dnsserver/zdirectives.go.
var directives = []string{
	"ready",
	"health",
	"prometheus",
	"errors",
	"log",
	"loadbalance",
	"cache",
	"kubernetes",
}

func init() { dnsserver.Directives = directives }

// runCoreDNS is CoreDNS's main; it parses os.Args with Go's flag package.
func runCoreDNS([]string) int {
	coremain.Run()
	return 0
}

func pluginList() string { return strings.Join(directives, ", ") }
