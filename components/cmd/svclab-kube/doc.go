// Command svclab-kube holds the Kubernetes components svclab runs in a lab, as one
// multi-call binary: kube-apiserver (with an embedded etcd), kube-controller-manager,
// kube-proxy, kubectl and CoreDNS, each the unmodified upstream program at the
// release pinned in this module's go.mod, linked as a library. One binary is built
// once (minutes) and cached; the five programs separately would each link most of
// the same packages again.
//
// The subcommand is the first argument, or the name the binary is invoked by (a
// link named kubectl runs kubectl). `svclab-kube version` prints the versions.
//
// svclab builds it (lab/kube.Binary) with
//
//	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w
//	  -X k8s.io/component-base/version.gitVersion=v1.37.2
//	  -X k8s.io/component-base/version.gitMajor=1
//	  -X k8s.io/component-base/version.gitMinor=37' ./cmd/svclab-kube
//
// static, so it also runs in svclab's VM guest, which has no C library; without the
// -X flags the Kubernetes version reads v0.0.0-master. (The release's commit is not
// known to a module build, so gitCommit stays empty.)
package main
