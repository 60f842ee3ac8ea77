package namespaces

import (
	"os"
	"os/exec"
	"runtime"
)

// Start starts argv as a child process running inside the named namespace, set
// up as Exec sets it up (env, binds), with this process's standard input, output
// and error, and returns it running. Unlike Exec, the caller stays: it can watch
// the command and say what happened around it. The child is forked from a
// thread of its own that enters the namespace and is never unlocked, so the
// runtime discards it and no other goroutine runs in the namespace.
func Start(name string, argv, env []string, binds ...Bind) (*exec.Cmd, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := enterWith(name, binds); err != nil {
			started <- err
			return
		}
		started <- cmd.Start()
	}()
	return cmd, <-started
}
