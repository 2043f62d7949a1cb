package k8s_test

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/archivist/archivist/k8s"
)

func TestOverlays(t *testing.T) {
	for _, o := range []string{"overlays/dev", "overlays/prod"} {
		t.Run(o, func(t *testing.T) {
			objs, err := k8s.Overlay(o)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int{}
			for _, obj := range objs {
				kinds[obj.Kind]++
			}
			if kinds["Deployment"] != 7 || kinds["PodDisruptionBudget"] != 7 || kinds["Job"] != 1 || kinds["Cluster"] != 1 || kinds["ScaledObject"] != 2 || kinds["NetworkPolicy"] != 4 {
				t.Errorf("objects by kind: %v", kinds)
			}
		})
	}
}

func TestNATSValuesAndCompose(t *testing.T) {
	if err := k8s.CheckNATSValues("nats/values.yaml"); err != nil {
		t.Error(err)
	}
	if err := k8s.CheckCompose("../compose.yaml"); err != nil {
		t.Error(err)
	}
}

func base(t *testing.T) [][]byte {
	t.Helper()
	docs, err := k8s.Build("overlays/prod")
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func decodeAll(t *testing.T, docs [][]byte) ([]k8s.Object, error) {
	t.Helper()
	var objs []k8s.Object
	for _, d := range docs {
		o, err := k8s.Decode(d)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, k8s.Check(objs)
}

// mutate changes the first document containing marker.
func mutate(t *testing.T, docs [][]byte, marker, old, new string) [][]byte {
	t.Helper()
	out := make([][]byte, len(docs))
	copy(out, docs)
	for i, d := range out {
		if strings.Contains(string(d), marker) && strings.Contains(string(d), old) {
			out[i] = []byte(strings.Replace(string(d), old, new, 1))
			return out
		}
	}
	t.Fatalf("no document with %q and %q", marker, old)
	return nil
}

// TestValidationCatchesFaults: the faults CI must refuse.
func TestValidationCatchesFaults(t *testing.T) {
	docs := base(t)
	if _, err := decodeAll(t, docs); err != nil {
		t.Fatalf("the unmodified manifests fail: %v", err)
	}
	for _, c := range []struct {
		name, marker, old, new, want string
	}{
		{"unknown field in a Deployment", "name: curator", "terminationGracePeriodSeconds:", "terminationGracePeriodSecond:", "unknown field"},
		{"unknown field in the CNPG Cluster", "kind: Cluster", "instances:", "instancez:", "unknown field"},
		{"unknown field in a ScaledObject", "kind: ScaledObject", "cooldownPeriod:", "cooldownPeriods:", "unknown field"},
		{"readiness probe lost", "name: cwa\n", "readinessProbe:", "startupProbe:", "readiness probe"},
		{"a service without its NATS user", "name: pwa\n", "value: pwa", "value: curator", "NATS_USER"},
		{"grace shorter than the shutdown", "name: auditor\n", "terminationGracePeriodSeconds: 40", "terminationGracePeriodSeconds: 10", "termination grace"},
		{"KEDA on a consumer that does not exist", "kind: ScaledObject", "consumer: researchers", "consumer: nobody", "no Archivist consumer"},
		{"runs as root", "name: indexer\n", "runAsNonRoot: true", "runAsNonRoot: false", "non-root"},
		{"no default deny", "name: default-deny-ingress", "podSelector: {}", "podSelector: {matchLabels: {x: y}}", "default-deny"},
		{"an API open to every pod", "name: archivist-apis", "    - namespaceSelector: {}\n      podSelector:\n        matchLabels:\n          archivist.io/api-client: \"true\"\n", "    - namespaceSelector: {}\n", "every pod of every namespace"},
		{"PostgreSQL without a certificate check", "name: cwa\n", "sslmode=verify-full", "sslmode=require", "without checking its certificate"},
		{"an API pod without the keys", "name: pwa\n", "secretName: archivist-api-keys", "secretName: something-else", "pwa does not mount the API keys"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeAll(t, mutate(t, docs, c.marker, c.old, c.new))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
	t.Run("a Deployment missing", func(t *testing.T) {
		var kept [][]byte
		for _, d := range docs {
			if !(strings.Contains(string(d), "kind: Deployment") && strings.Contains(string(d), "name: researcher\n")) {
				kept = append(kept, d)
			}
		}
		if _, err := decodeAll(t, kept); err == nil || !strings.Contains(err.Error(), "researcher has no Deployment") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("HPA and KEDA on one Deployment", func(t *testing.T) {
		objs, err := decodeAll(t, docs)
		if err != nil {
			t.Fatal(err)
		}
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		hpa.Name = "researcher"
		hpa.Spec.ScaleTargetRef.Kind, hpa.Spec.ScaleTargetRef.Name = "Deployment", "researcher"
		objs = append(objs, k8s.Object{Kind: "HorizontalPodAutoscaler", Name: "researcher", Value: hpa})
		if err := k8s.Check(objs); err == nil || !strings.Contains(err.Error(), "both scale") {
			t.Errorf("error %v", err)
		}
	})
}
