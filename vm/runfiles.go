package vm

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// guestWorkDir is where the command runs and where relative Files land.
const guestWorkDir = "/svclab"

func defaultEnv() map[string]string {
	return map[string]string{
		"PATH":      "/svclab/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin",
		"HOME":      "/root",
		"SVCLAB_VM": "1",
	}
}

// runTree is the per-run part of the guest: the caller's files, the command
// script and the flag asking /init to send /out back.
func runTree(c Config) (tree, error) {
	t := tree{}
	for _, g := range sortedKeys(c.Files) {
		host := c.Files[g]
		gp := g
		if !path.IsAbs(gp) {
			gp = path.Join(guestWorkDir, gp)
		}
		// A symlinked host directory is copied as the directory it names.
		host, err := filepath.EvalSymlinks(host)
		if err != nil {
			return nil, fmt.Errorf("vm: file for guest %s: %w", gp, err)
		}
		fi, err := os.Stat(host)
		if err != nil {
			return nil, fmt.Errorf("vm: file for guest %s: %w", gp, err)
		}
		if fi.IsDir() {
			err = t.hostTree(gp, host, true)
		} else {
			err = t.hostFile(gp, host, true)
		}
		if err != nil {
			return nil, fmt.Errorf("vm: file for guest %s: %w", gp, err)
		}
	}
	t.data("etc/svclab/run.sh", 0o644, []byte(runScript(c)))
	if c.OutDir != "" {
		t.data("etc/svclab/send-out", 0o644, nil)
	}
	return t, nil
}

// runScript is the dash script /init runs: it enters the working directory,
// sets the environment and execs the command, so the command's exit status is
// the script's.
func runScript(c Config) string {
	env := defaultEnv()
	for k, v := range c.Env {
		env[k] = v
	}
	var b strings.Builder
	b.WriteString("cd " + shellQuote(guestWorkDir) + " || exit 127\n")
	for _, k := range sortedKeys(env) {
		b.WriteString("export " + shellQuote(k+"="+env[k]) + "\n")
	}
	b.WriteString("exec")
	for _, a := range c.Command {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// shellQuote quotes s for a POSIX shell: single quotes keep everything literal
// except a single quote, which is closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
