package main

import (
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/record"
)

// completeNames registers the shells' completion (svclab completion bash|zsh|fish)
// of what svclab's commands take by name: labs, members, modes, topologies,
// backends, schedulers, proxies.
func completeNames(root *cobra.Command) {
	labArgs := map[string]cobra.CompletionFunc{
		"down": completeLabs, "inspect": completeLabs, "kubectl": completeLabs, "logs": completeLabs, "exec": completeExec, "graph": completeLabs,
	}
	flags := map[string]cobra.CompletionFunc{
		"mode":      completeModes,
		"file":      fixed(func() []string { return strings.Split(shippedNames(), ", ") }, cobra.ShellCompDirectiveDefault),
		"backend":   fixed(func() []string { return []string{"nft", "legacy"} }, cobra.ShellCompDirectiveNoFileComp),
		"scheduler": fixed(func() []string { return schedulers }, cobra.ShellCompDirectiveNoFileComp),
		"proxy":     fixed(func() []string { return []string{proxySvclab, proxyKubeProxy} }, cobra.ShellCompDirectiveNoFileComp),
		"lab":       completeLabs,
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f, ok := labArgs[c.Name()]; ok && c.Parent() == root {
			c.ValidArgsFunction = f
		}
		for name, f := range flags {
			if c.LocalFlags().Lookup(name) != nil {
				c.RegisterFlagCompletionFunc(name, f)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func fixed(names func() []string, d cobra.ShellCompDirective) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) { return names(), d }
}

// completeModes are the proxy modes, and all where the command takes it.
func completeModes(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	modes := proxy.Modes()
	if c.Name() == "verify" {
		modes = append(modes, "all")
	}
	return modes, cobra.ShellCompDirectiveNoFileComp
}

// completeLabs are the running labs' IDs and names, for a command's first argument.
func completeLabs(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return labNames(record.DefaultDir), cobra.ShellCompDirectiveNoFileComp
}

// completeExec is a lab, then one of its members.
func completeExec(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return completeLabs(c, args, toComplete)
	case 1:
		return memberNames(record.DefaultDir, args[0]), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveDefault
}

// labNames are the IDs of the labs recorded in dir, and their names.
func labNames(dir string) []string {
	recs, _ := record.List(dir)
	seen := map[string]bool{}
	for _, r := range recs {
		seen[r.ID], seen[r.Name] = true, true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// memberNames are the members of lab id (its ID or name) recorded in dir.
func memberNames(dir, id string) []string {
	r, err := record.Find(dir, id)
	if err != nil {
		return nil
	}
	var names []string
	for _, m := range r.Members {
		if m.Kind != member.KindFabric {
			names = append(names, m.Name)
		}
	}
	return names
}
