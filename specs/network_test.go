package specs

import (
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/traffic"
)

// A bare network (no proxy mode): what the lab itself must provide before any
// Service rule exists.
var _ = Describe("The lab network", Ordered, Label("network"), func() {
	var l *lab.Lab
	BeforeAll(func() {
		l = upLab(shipped("web.yaml"), lab.Options{})
	})
	dumpOnFailure(&l)

	DescribeTable("connects members by their own addresses",
		func(from, to, sawSource string) {
			r, err := ask(l, from, to)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Addr.String()).To(Equal(to))
			Expect(r.Client.Addr().String()).To(Equal(sawSource), "no address translation without a Service")
		},
		Entry("pod to pod on one node (bridged on cni0)", "client", "10.244.1.10:8080", "10.244.1.5"),
		Entry("pod to pod across nodes (routed host-gw)", "client", "10.244.2.10:8080", "10.244.1.5"),
		Entry("pod to itself", "web-a", "10.244.1.10:8080", "10.244.1.10"),
		Entry("node to a local pod (from its cni0 address)", "node-1", "10.244.1.10:8080", "10.244.1.1"),
		Entry("node to a pod on another node (from its node address)", "node-1", "10.244.2.10:8080", "192.168.1.10"),
	)

	It("lets an outside client reach node addresses but not pods", func() {
		// Nothing listens on the nodes: a reset proves the path there and back.
		Expect(outcome(l, "outside", "TCP", "192.168.1.10:9", time.Second)).To(Equal(traffic.Refused))
		Expect(outcome(l, "outside", "TCP", "192.168.1.11:9", time.Second)).To(Equal(traffic.Refused))
		Expect(outcome(l, "outside", "TCP", "10.244.1.10:8080", time.Second)).To(Equal(traffic.Unreachable),
			"pod addresses are not routed outside the cluster")
	})

	It("answers UDP on UDP ports and refuses closed ones", func() {
		Expect(refusal(l, "client", "UDP", "10.244.2.10:8080")).To(Equal(traffic.Refused),
			"web-b serves 8080/TCP only: the kernel answers ICMP port unreachable")
	})

	It("keeps a long-lived connection, served by the same pod", func() {
		c, err := traffic.Open(dial(l, "client", "TCP", "10.244.2.10:8080", 2*time.Second))
		Expect(err).NotTo(HaveOccurred())
		defer c.Close()
		for i := 0; i < 5; i++ {
			r, err := c.Ask()
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Pod).To(Equal("web-b"))
			Expect(r.Client).To(Equal(c.Local()))
		}
	})

	It("binds a fixed client source port again and again", func() {
		d := dial(l, "client", "TCP", "10.244.2.10:8080", 2*time.Second)
		d.SrcPort = 40001
		for i := 0; i < 3; i++ {
			r, err := traffic.Request(d)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Client).To(Equal(netip.MustParseAddrPort("10.244.1.5:40001")))
		}
	})
})
