package main

import (
	"flag"
	"os"
	"slices"
	_ "time/tzdata" // CronJob time zones, as upstream's API server and controller manager mains embed them

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json, as upstream's mains register it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream's mains register them
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric, as upstream's mains register it
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
)

// Each of these is the upstream program's main (cmd/<name>/<name>.go at the pinned
// release) with nothing changed but where os.Args came from.

func runControllerManager([]string) int {
	return cli.Run(controllermanager.NewControllerManagerCommand())
}

func runProxy([]string) int {
	keepProxyGoFlags()
	return cli.Run(proxy.NewProxyCommand())
}

func runKubectl([]string) int {
	logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck // as upstream's main: best effort before flags are parsed
	command := kubectl.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err)
	}
	return 0
}

// coreDNSGoFlags are the flags CoreDNS's main package registers on Go's flag set
// when it is initialised (coremain/run.go's init).
var coreDNSGoFlags = []string{"conf", "plugins", "pidfile", "version", "quiet", "log-format", "dns.port", "p"}

// keepProxyGoFlags drops CoreDNS's flags from Go's flag set, which kube-proxy's
// command adds to its own (for flags some of its libraries register there): a
// kube-proxy built alone has none of them, so this one must not show or accept
// them either.
func keepProxyGoFlags() {
	kept := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	flag.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(coreDNSGoFlags, f.Name) {
			kept.Var(f.Value, f.Name, f.Usage)
		}
	})
	flag.CommandLine = kept
}
