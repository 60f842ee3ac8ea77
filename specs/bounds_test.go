package specs

import (
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/verify"
)

// A verify under load once printed "checking 18 flows" and then nothing for
// 400 s. Every check runs under a bound and a heartbeat names the checks still
// running; here a backend whose namespace silently drops every packet keeps the
// checks of the flows it may answer waiting (each attempt that picks it waits
// out its timeout, some 14 of them in a row), well past a bound of a few seconds.
var _ = Describe("svclab verify's bounds", Label("verify"), func() {
	for _, m := range ownModes() {
		It("fails a check that exceeds its bound, naming the flow, its member and what it waited for, with a heartbeat, "+m.label, Label(m.label), func(ctx SpecContext) {
			l := upLab(shipped("web.yaml"), m.options())
			// Every packet to web-b dropped in its own namespace: no rule
			// of the proxy's is involved, and nothing answers.
			be, err := xtables.BackendFor("")
			Expect(err).NotTo(HaveOccurred())
			_, err = namespaces.Output(netnsOf(l, "web-b"), be.IPTables, "-I", "INPUT", "-j", "DROP")
			Expect(err).NotTo(HaveOccurred())

			model, err := verify.ModelOf(l.Mode())
			Expect(err).NotTo(HaveOccurred())
			p := verify.Derive(l.Topology(), model, l.ProxyConfig())
			// The client pod's flows: each may be answered by web-b.
			var flows []verify.Flow
			for _, f := range p.Flows {
				if f.Source.Name == "client" {
					flows = append(flows, f)
				}
			}
			Expect(flows).NotTo(BeEmpty())
			p.Flows, p.Lookups = flows, nil

			const bound = 5 * time.Second
			heartbeat := gbytes.NewBuffer()
			checks, err := verify.ExecuteBounded(ctx, l, p, m.label, verify.Bounds{Check: bound, Every: time.Second, Log: heartbeat})
			Expect(err).NotTo(HaveOccurred())
			Expect(checks).To(HaveLen(len(flows)))
			for _, c := range checks {
				Expect(c.Expected).To(ContainSubstring("10.244.2.10:8080"), "%s may be answered by web-b", c.Name)
				Expect(c.Passed).To(BeFalse(), "%s: %s", c.Name, c.Observed)
				GinkgoWriter.Printf("%s: %d attempts, expected %s: %s\n", c.Name, c.Attempts, c.Expected, c.Observed)
				Expect(c.Observed).To(MatchRegexp(`^no result within 5s: %s from client, waiting [0-9.]+m?s for (connect to|a reply from|the close of the connection to) TCP [0-9.:]+ \(attempt \d+ of \d+\)`, regexp.QuoteMeta(c.Name)),
					"the check names its flow, its member and what it waited for")
			}
			Expect(string(heartbeat.Contents())).To(MatchRegexp(`(?m)^%s: \d+ of %d checks done after \d+s; running: .* from client, waiting `, regexp.QuoteMeta(m.label), len(flows)),
				"the heartbeat names the checks still running")
			GinkgoWriter.Printf("heartbeat:\n%s\nchecks:\n", heartbeat.Contents())
			for _, c := range checks {
				GinkgoWriter.Printf("%s: %s\n", c.Name, strings.TrimSpace(c.Observed))
			}
		}, NodeTimeout(5*time.Minute))
	}
})
