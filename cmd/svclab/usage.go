package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/svclab/svclab/internal/suggest"
)

// strictUsage makes every usage mistake in root's commands a usage error (exit
// 2): an unknown flag (with the nearest flag's name), a wrong number of
// arguments, an unknown command (with the nearest command's name).
func strictUsage(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		var ne *pflag.NotExistError
		if errors.As(err, &ne) && len(ne.GetSpecifiedName()) > 1 {
			if s := closestFlag(c, ne.GetSpecifiedName()); s != "" {
				err = fmt.Errorf("%w; did you mean --%s?", err, s)
			}
		}
		return usage(err)
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.HasSubCommands() && !c.Runnable():
			// Runnable, so that cobra hands an unknown command to Args rather
			// than answering it with help and status 0.
			c.Args = unknownCommand
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		case c.Args != nil:
			check := c.Args
			c.Args = func(c *cobra.Command, args []string) error { return usage(check(c, args)) }
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownCommand refuses an argument to a command that only groups others.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, append([]string{sub.Name()}, sub.Aliases...)...)
		}
	}
	err := fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath())
	if s := suggest.Closest(args[0], names, 2); s != "" {
		err = fmt.Errorf("%w; did you mean %q?", err, s)
	}
	return usage(err)
}

// closestFlag is the flag of c nearest to name, "" when none is near.
func closestFlag(c *cobra.Command, name string) string {
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	return suggest.Closest(name, names, 2)
}
