package topology

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestCorpus: a seed gives one corpus, another seed another, and a corpus of a
// few dozen Services holds every shape it promises.
func TestCorpus(t *testing.T) {
	a, err := Corpus(1, 40)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Corpus(1, 40)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Services, again.Services) || !reflect.DeepEqual(a.Pods, again.Pods) {
		t.Error("seed 1 gave two different corpora")
	}
	other, err := Corpus(2, 40)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a.Services, other.Services) {
		t.Error("seeds 1 and 2 gave the same corpus")
	}

	seen := map[string]bool{}
	endpoints := map[string]int{}
	for _, p := range a.Pods {
		endpoints[p.Labels["app"]]++
		switch {
		case p.Terminating && p.Ready:
			seen["terminating serving"] = true
		case p.Terminating:
			seen["terminating"] = true
		case !p.Ready:
			seen["not ready"] = true
		}
	}
	for _, s := range a.Services {
		seen[string(s.Spec.Type)] = true
		if endpoints[s.Name] == 0 {
			seen["no endpoints"] = true
		}
		if s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
			seen["external Local"] = true
		}
		if p := s.Spec.InternalTrafficPolicy; p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal {
			seen["internal Local"] = true
		}
		if s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
			seen["affinity"] = true
		}
		if len(s.Spec.Ports) > 1 {
			seen["multi-port"] = true
		}
		for _, p := range s.Spec.Ports {
			seen[string(p.Protocol)] = true
			if p.Name == "" {
				seen["unnamed port"] = true
			}
			if p.TargetPort.StrVal != "" {
				seen["named targetPort"] = true
			}
		}
	}
	for _, want := range []string{"ClusterIP", "NodePort", "LoadBalancer", "TCP", "UDP", "no endpoints", "external Local", "internal Local",
		"affinity", "multi-port", "unnamed port", "named targetPort", "terminating serving", "terminating", "not ready"} {
		if !seen[want] {
			t.Errorf("corpus seed 1 of 40 Services has no %s", want)
		}
	}
}
