package kube

// KubectlArgs are the svclab-kube arguments that run kubectl against a lab: its
// kubeconfig, and its discovery and HTTP caches in cacheDir (kubectl would
// otherwise write them under ~/.kube/cache, outside the lab's run directory),
// then args. Run it inside one of the lab's namespaces (Start, namespaces.Output):
// the API server's address is reachable only there.
func KubectlArgs(kubeconfig, cacheDir string, args ...string) []string {
	return append([]string{"kubectl", "--kubeconfig=" + kubeconfig, "--cache-dir=" + cacheDir}, args...)
}
