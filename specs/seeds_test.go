package specs

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// The rules seed 002 printed from its node (`iptables-save | grep ...`), as this
// node's kernel prints them. Two corrections to the article, both from the kernel
// and kube-proxy rather than taste: iptables-save prints the statistic match's
// probability with 11 decimals of its 2^31 fixed-point value (0.33333333349, not
// 0.33333333333333), and kube-proxy 1.18 also writes the Service comment on the
// KUBE-SEP rules, which the article left out. Its two misprinted chain names
// (JPXQHLXQSDHS2NX, 5H6K0BYUZ646ISHJ) are written as kube-proxy hashes them.
var seed002 = []string{
	`-A KUBE-SERVICES ! -s 10.244.0.0/16 -d 10.101.20.80/32 -p tcp -m comment --comment "default/service-httpd: cluster IP" -m tcp --dport 8080 -j KUBE-MARK-MASQ`,
	`-A KUBE-SERVICES -d 10.101.20.80/32 -p tcp -m comment --comment "default/service-httpd: cluster IP" -m tcp --dport 8080 -j KUBE-SVC-5FEAUJNCXGRSJFN5`,
	`-A KUBE-SVC-5FEAUJNCXGRSJFN5 -m comment --comment "default/service-httpd:" -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-KIILMGZB3LCHX6UB`,
	`-A KUBE-SVC-5FEAUJNCXGRSJFN5 -m comment --comment "default/service-httpd:" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-JPXOQHLXQSDHS2NX`,
	`-A KUBE-SVC-5FEAUJNCXGRSJFN5 -m comment --comment "default/service-httpd:" -j KUBE-SEP-5H6KOBYUZ646ISHJ`,
	`-A KUBE-SEP-KIILMGZB3LCHX6UB -s 10.244.1.27/32 -m comment --comment "default/service-httpd:" -j KUBE-MARK-MASQ`,
	`-A KUBE-SEP-KIILMGZB3LCHX6UB -p tcp -m comment --comment "default/service-httpd:" -m tcp -j DNAT --to-destination 10.244.1.27:80`,
	`-A KUBE-NODEPORTS -p tcp -m comment --comment "default/service-httpd:" -m tcp --dport 32000 -j KUBE-MARK-MASQ`,
	`-A KUBE-NODEPORTS -p tcp -m comment --comment "default/service-httpd:" -m tcp --dport 32000 -j KUBE-SVC-5FEAUJNCXGRSJFN5`,
}

var _ = Describe("The seeds' nodes", Label("seeds"), func() {
	// The real kube-proxy is 1.37: seed 002's 1.18 layout is svclab's alone.
	for _, m := range ownModes() {
		if m.model() != proxy.ModelIPTables {
			continue
		}
		It("reproduce seed 002's iptables-save on a kube-proxy 1.18 node, "+m.label, Label(m.label), func() {
			o := m.options()
			o.KubeProxyVersion = "1.18"
			l := upLab(shipped("httpd.yaml"), o)
			out, err := namespaces.Output(netnsOf(l, "node1"), xtables.SaveProgram(m.backend), "-t", "nat")
			Expect(err).NotTo(HaveOccurred())
			lines := strings.Split(string(out), "\n")
			for _, want := range seed002 {
				Expect(lines).To(ContainElement(want))
			}
			// And the seed's curl: every node answers the NodePort.
			for _, node := range []string{"172.16.213.221", "172.16.213.222", "172.16.213.223"} {
				backendsSeen(l, "laptop", "TCP", node+":32000", "httpservice-deployment-1", "httpservice-deployment-2", "httpservice-deployment-3")
			}
		})
	}

	for _, m := range modes {
		It("serve seed 000's Service: ClusterIP 10.96.123.45:80 and NodePort 30080 to pods on 8080, "+m.label, Label(m.label), func() {
			l := upLab(shipped("web.yaml"), m.options())
			for _, r := range backendsSeen(l, "client", "TCP", "10.96.123.45:80", "web-a", "web-b") {
				Expect(r.Addr.Port()).To(BeEquivalentTo(8080))
			}
			backendsSeen(l, "outside", "TCP", "192.168.1.10:30080", "web-a", "web-b")
		})
	}
})
