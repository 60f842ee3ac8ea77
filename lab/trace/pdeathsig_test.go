package trace

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/record"
)

// TestMonitorOutlivesEndedThreads: a monitor gets SIGKILL when the thread
// that started it ends (Pdeathsig, so that it dies with a killed trace), and
// the runtime ends a pooled thread whenever a goroutine that locked it ends
// without unlocking it. Many such goroutines run after the monitor started,
// as other work of the process may: the monitor must still run and still
// read its namespace's trace events. A monitor started inside namespaces.Do,
// whose thread goes back to the pool, is killed so (the negative control,
// by hand: 9 of 10 runs failed, in each of two tries: "nft monitor trace
// ended").
func TestMonitorOutlivesEndedThreads(t *testing.T) {
	ns := nstest.New(t, "runs nft monitor trace")
	port := firstPort + rand.IntN(ports)
	if err := addTable(ns.Name, port, "UDP"); err != nil {
		t.Fatal(err)
	}
	m, err := startMonitor(ns.Name, monitorCommand(MethodNFTMonitor), port)
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	p := record.ProcessOf(m.cmd.Process.Pid)
	// Each goroutine ends a thread of the pool (the runtime keeps no more
	// idle threads than it needs, so the monitor's starter would be among
	// the first taken).
	for range 4 * runtime.GOMAXPROCS(0) * 8 {
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
			}()
		}
		wg.Wait()
	}
	if err := m.sync(port); err != nil {
		t.Fatalf("the monitor, after threads ended: %v", err)
	}
	if !p.Alive() {
		t.Fatalf("the monitor %d ended", p.PID)
	}
}
