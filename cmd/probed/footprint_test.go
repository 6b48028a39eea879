package main

import (
	"os/exec"
	"strings"
	"testing"
)

// probed links only the clients and API groups it uses: each of these,
// once linked, puts megabytes of executable pages back into the RSS of
// every node's probed (docs/benchmarks/footprint.md).
var notLinked = []string{
	"k8s.io/client-go/kubernetes",           // the Clientset, and its scheme of every API group
	"k8s.io/client-go/informers",            // the factory: an informer of every resource
	"k8s.io/client-go/applyconfigurations/", // apply configurations, and through them every group's scheme
	"k8s.io/apiserver",                      // delegated auth's closure: cel-go, OpenTelemetry, every API group
}

// apiGroups are the only k8s.io/api groups probed may link: the ones it
// calls.
var apiGroups = map[string]bool{
	"k8s.io/api/core/v1": true, "k8s.io/api/authentication/v1": true,
	"k8s.io/api/authorization/v1": true, "k8s.io/api/admissionregistration/v1": true,
	"k8s.io/api/policy/v1": true, "k8s.io/api/coordination/v1": true,
}

func TestFootprintNotLinked(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/api/") && !apiGroups[dep] {
			t.Errorf("probed links the API group %s", dep)
		}
		for _, bad := range notLinked {
			if dep == bad || strings.HasPrefix(dep, strings.TrimSuffix(bad, "/")+"/") {
				t.Errorf("probed links %s (under %s)", dep, bad)
			}
		}
	}
}
