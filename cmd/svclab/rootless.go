package main

import (
	"os"

	"github.com/svclab/svclab/internal/rootless"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
)

// invocation is the arguments svclab runs with, which a run without root
// gives again to the svclab it starts in a user namespace.
var invocation []string

// privileged lets the command go on with what programming the kernel takes.
// As root it checks the privileges, as before. Without root it runs the
// command again in a user namespace of its own (rootless.Run), or, for a
// command on the running lab called lab, in its owner's (rootless.Join), and
// exits with that command's status: nothing of it runs here.
func privileged(lab string) error {
	if !rootless.Needed() {
		return namespaces.CheckPrivileges()
	}
	run := func() (int, error) { return rootless.Run(invocation) }
	if lab != "" {
		if r, err := record.Find(rootless.StateDir(), lab); err == nil && r.Owner.Alive() {
			run = func() (int, error) { return rootless.Join(r.Owner.PID, invocation) }
		}
	}
	code, err := run()
	if err != nil {
		return err
	}
	os.Exit(code)
	return nil
}
