package record

import (
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
}

func (d Death) String() string { return d.Component + " exited " + d.Status }

// Health is what `svclab ls` says of a lab whose owner runs: "running", or
// "degraded: " and the components that died.
func (r *Lab) Health() string {
	if len(r.Deaths) == 0 {
		return "running"
	}
	said := make([]string, len(r.Deaths))
	for i, d := range r.Deaths {
		said[i] = d.String()
	}
	return "degraded: " + strings.Join(said, "; ")
}
