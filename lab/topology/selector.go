package topology

import (
	corev1 "k8s.io/api/core/v1"
)

// podSelector finds the pods a Service selects without testing every pod against
// every Service: a lab for benchmarks has thousands of each. Pods are indexed by
// namespace, label key and value; a selector looks up its rarest pair and checks
// only those pods.
type podSelector struct {
	pods    []Pod
	byLabel map[podLabel][]int
}

type podLabel struct{ namespace, key, value string }

func newPodSelector(pods []Pod) *podSelector {
	s := &podSelector{pods: pods, byLabel: map[podLabel][]int{}}
	for i, p := range pods {
		if !p.IP.IsValid() {
			continue
		}
		for k, v := range p.Labels {
			l := podLabel{p.Namespace, k, v}
			s.byLabel[l] = append(s.byLabel[l], i)
		}
	}
	return s
}

// selected lists the pods with an address that the Service's selector matches,
// in the Service's namespace, in the order of the lab's pods.
func (s *podSelector) selected(svc *corev1.Service) []*Pod {
	if svc.Spec.Selector == nil {
		return nil
	}
	var candidates []int
	first := true
	for k, v := range svc.Spec.Selector {
		posting := s.byLabel[podLabel{svc.Namespace, k, v}]
		if first || len(posting) < len(candidates) {
			candidates, first = posting, false
		}
	}
	var out []*Pod
	for _, i := range candidates {
		if p := &s.pods[i]; selects(svc, p) {
			out = append(out, p)
		}
	}
	return out
}

// selects tells whether the Service's selector matches the pod, in its namespace.
func selects(svc *corev1.Service, p *Pod) bool {
	if svc.Spec.Selector == nil || p.Namespace != svc.Namespace {
		return false
	}
	for k, v := range svc.Spec.Selector {
		if got, ok := p.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
