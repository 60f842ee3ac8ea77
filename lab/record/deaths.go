package record

import (
	"fmt"
	"strings"
	"time"
)

// Death is a component process of a lab that ended without the lab stopping
// it: killed, crashed or exited by itself.
type Death struct {
	// Component names it and where it ran: "kube-proxy on node-1".
	Component string `json:"component"`
	PID       int    `json:"pid"`
	// Status is its exit status as a shell reports it: "1", "137 (killed)".
	Status string    `json:"status"`
	At     time.Time `json:"at"`
	// Log is the file its output went to.
	Log string `json:"log,omitempty"`
	// Restarted is when the lab started it again; nil while it is down.
	Restarted *time.Time `json:"restarted,omitempty"`
}

func (d Death) String() string { return d.Component + " exited " + d.Status }

// Health is what `svclab ls` says of a lab whose owner runs: "degraded: " and
// the components that died and are not restarted yet, else "running" and the
// components restarted, with how often.
func (r *Lab) Health() string {
	var down []string
	var restarted []string
	restarts := map[string]int{}
	for _, d := range r.Deaths {
		if d.Restarted == nil {
			down = append(down, d.String())
			continue
		}
		if restarts[d.Component] == 0 {
			restarted = append(restarted, d.Component)
		}
		restarts[d.Component]++
	}
	if len(down) > 0 {
		return "degraded: " + strings.Join(down, "; ")
	}
	if len(restarted) == 0 {
		return "running"
	}
	for i, c := range restarted {
		restarted[i] = fmt.Sprintf("%s %d", c, restarts[c])
	}
	return "running (restarts: " + strings.Join(restarted, ", ") + ")"
}
