package verify

import (
	labrecord "github.com/svclab/svclab/lab/record"
)

// diedDuring is a failed check for every component of the lab that died
// since it was created: each flow passed against whatever still ran, and a
// kube-proxy keeps its last rules when the API server is gone, so the flows
// alone would pass a lab that is not whole.
func diedDuring(deaths []labrecord.Death, label string) []Check {
	checks := make([]Check, len(deaths))
	for i, d := range deaths {
		checks[i] = Check{
			Name: "component " + d.Component, Mode: label, From: "lab", To: d.Component, Service: "-",
			Expected: "running", Observed: "exited " + d.Status + " at " + d.At.Format("15:04:05.000"),
			Why: "a component of the lab died while it was verified (its log: " + d.Log + ")",
		}
	}
	return checks
}
