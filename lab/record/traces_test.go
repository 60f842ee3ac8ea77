package record

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/internal/nstest"
)

// TestRemoveKilledTraces: of the traces a lab's run directory records, a
// killed one's table is deleted from its namespace and its recorded monitor,
// still running, is ended; a process under a recorded PID whose start time is
// not the recorded one (a PID reused since) is never signalled; a trace whose
// process still runs keeps its table and record. Real nf_tables tables in a
// throwaway namespace, real processes.
func TestRemoveKilledTraces(t *testing.T) {
	ns := nstest.New(t, "deletes nf_tables tables")
	dir := t.TempDir()
	const id = "web-test"
	addTable := func(port int) {
		t.Helper()
		if out, err := ns.Output("nft", "add", "table", "ip", TraceTable(port)); err != nil {
			t.Fatalf("nft add table: %v: %s", err, out)
		}
	}
	start := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	// A writer that has ended: its PID, with a start time no process has.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := Process{PID: gone.Process.Pid, Start: 1}

	monitor, stranger := start(), start()
	reused := ProcessOf(stranger.Process.Pid)
	reused.Start++ // the recorded process had this PID before the stranger
	killed := &Trace{Port: 20001, Table: TraceTable(20001), Namespaces: []string{ns.Name, "svclab-t-gone"},
		Writer: dead, Monitors: []Process{ProcessOf(monitor.Process.Pid), reused}}
	live := &Trace{Port: 20002, Table: TraceTable(20002), Namespaces: []string{ns.Name}, Writer: Self()}
	for _, tr := range []*Trace{killed, live} {
		addTable(tr.Port)
		if err := WriteTrace(dir, id, tr); err != nil {
			t.Fatal(err)
		}
	}

	k, err := RemoveKilledTraces(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	want := KilledTraces{Lab: id, Traces: 1, Tables: 1, Monitors: 1}
	if k != want {
		t.Errorf("RemoveKilledTraces = %+v, want %+v", k, want)
	}
	if got, wantText := k.String(), "lab web-test: removed a killed trace's leftovers: 1 trace table, 1 monitor process"; got != wantText {
		t.Errorf("its report reads %q, want %q", got, wantText)
	}
	if ProcessOf(monitor.Process.Pid).Alive() {
		t.Errorf("the killed trace's monitor %d still runs", monitor.Process.Pid)
	}
	if !ProcessOf(stranger.Process.Pid).Alive() {
		t.Errorf("process %d, which only reused a recorded PID, was signalled", stranger.Process.Pid)
	}
	out, err := ns.Output("nft", "list", "tables")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), killed.Table) || !strings.Contains(string(out), live.Table) {
		t.Errorf("tables left: %s; want %s gone and %s (its trace runs) kept", out, killed.Table, live.Table)
	}
	files, _ := filepath.Glob(filepath.Join(RunDir(dir, id), "trace-*"))
	if len(files) != 1 || files[0] != traceFile(dir, id, live) {
		t.Errorf("trace records left: %v; want only the running trace's", files)
	}

	// Nothing is left to remove: nothing is said.
	if k, err := RemoveKilledTraces(dir, id); err != nil || k.Removed() {
		t.Errorf("a second RemoveKilledTraces = %+v, %v; want nothing removed", k, err)
	}
	// A lab without a run directory has no traces.
	if k, err := RemoveKilledTraces(dir, "web-none"); err != nil || k.Removed() {
		t.Errorf("RemoveKilledTraces of a lab without a run directory = %+v, %v", k, err)
	}
	if _, err := os.Stat(RunDir(dir, "web-none")); !os.IsNotExist(err) {
		t.Errorf("RemoveKilledTraces created a run directory: %v", err)
	}
}
