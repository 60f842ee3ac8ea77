package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/version"
)

// versions is what `svclab version` reports.
type versions struct {
	// Svclab is this build's module version (with its commit when built from a
	// checkout).
	Svclab string `json:"svclab"`
	Go     string `json:"go"`
	// KubeProxyRules are the kube-proxy releases whose rules svclab's proxiers
	// reproduce, and the default one.
	KubeProxyRules struct {
		Oldest  string `json:"oldest"`
		Default string `json:"default"`
	} `json:"kubeProxyRules"`
	// Components is the Kubernetes release components/go.mod pins; Binary the
	// component binary a lab would run now ("" when none is built), and
	// BinaryVersions what it says of itself; BinaryError why it could not.
	Components     string   `json:"components"`
	Binary         string   `json:"binary,omitempty"`
	BinaryVersions []string `json:"binaryVersions,omitempty"`
	BinaryError    string   `json:"binaryError,omitempty"`
}

func init() {
	cobra.AddTemplateFunc("versionText", func() string {
		var b strings.Builder
		writeVersions(&b, currentVersions(context.Background(), ""))
		return b.String()
	})
}

func newVersionCommand() *cobra.Command {
	var (
		asJSON bool
		path   string
	)
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print svclab's version and the Kubernetes components' versions",
		Long: `Print svclab's version, the kube-proxy releases whose rules its proxiers reproduce,
the Kubernetes release components/ pins and, when the component binary is built (or
given by --kube-binary or $SVCLAB_KUBE_BINARY), the versions it reports of
Kubernetes, etcd, CoreDNS and Go. It builds nothing. svclab --version prints the same.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersions(cmd.Context(), path)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			writeVersions(cmd.OutOrStdout(), v)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the versions as JSON")
	cmd.Flags().StringVar(&path, "kube-binary", "", "report on this component binary instead of the one a lab would use")
	return cmd
}

// svclabVersion is this build's version: the module's, with the commit and
// whether the tree was modified when the build had them.
func svclabVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "(devel)" {
		v = "devel"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) {
		v += " (commit " + rev[:min(12, len(rev))]
		if settings["vcs.modified"] == "true" {
			v += ", modified"
		}
		v += ")"
	}
	return v
}

// currentVersions gathers the versions; the component binary's are asked of the
// binary path names, else of the one a lab would run, never built for this.
func currentVersions(ctx context.Context, path string) versions {
	v := versions{Svclab: svclabVersion(), Go: runtime.Version(), Components: kube.Version}
	v.KubeProxyRules.Oldest, v.KubeProxyRules.Default = version.Oldest.String(), version.Default.String()
	if ctx == nil {
		ctx = context.Background()
	}
	bin, err := kube.Binary(ctx, kube.Options{Path: path, NoBuild: true})
	if err == nil {
		v.Binary = bin
		v.BinaryVersions, err = kube.Versions(ctx, bin)
	}
	if err != nil {
		v.BinaryError = err.Error()
	}
	return v
}

func writeVersions(w io.Writer, v versions) {
	fmt.Fprintf(w, "svclab %s (%s, %s/%s)\n", v.Svclab, v.Go, runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "kube-proxy rules reproduced: %s to %s (default %s)\n", v.KubeProxyRules.Oldest, v.KubeProxyRules.Default, v.KubeProxyRules.Default)
	fmt.Fprintf(w, "Kubernetes components: %s (components/go.mod)\n", v.Components)
	switch {
	case v.BinaryError != "":
		fmt.Fprintf(w, "  binary: %s\n", v.BinaryError)
	default:
		fmt.Fprintf(w, "  binary: %s\n", v.Binary)
		for _, l := range v.BinaryVersions {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}
