package verify

// Deaths is a failed check for every component of l that died since l was
// created, to be added once a run's checks (and traces) are over: each flow
// passed against whatever still ran, and a kube-proxy keeps its last rules
// when the API server is gone, so the flows alone would pass a lab that is not
// whole; a component killed while the lab came up, and restarted, leaves a lab
// whose checks prove nothing about its history either.
func Deaths(l Lab, label string) []Check {
	deaths := l.Deaths(l.Record().Created)
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
