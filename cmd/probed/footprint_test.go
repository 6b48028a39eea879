package main

import (
	"os/exec"
	"strings"
	"testing"
)

// probed's API-facing packages link only the clients they use: each of
// these, once linked, puts megabytes of executable pages back into the RSS
// of every node's probed (docs/benchmarks/footprint.md). pkg/endpoints is
// not yet among them: k8s.io/apiserver's delegated authentication imports
// the Clientset (the linker keeps little of it).
var notLinked = []string{
	"k8s.io/client-go/kubernetes",           // the Clientset: a typed client of every resource
	"k8s.io/client-go/informers",            // the factory: an informer of every resource
	"k8s.io/client-go/applyconfigurations/", // apply configurations, and through them every group's scheme
}

var clientPackages = []string{
	"../../pkg/kubeclient", "../../pkg/podinformer", "../../pkg/nodeinfo", "../../pkg/status",
	"../../pkg/reachpolicy", "../../pkg/servingca",
}

func TestFootprintNotLinked(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(goBin, append([]string{"list", "-deps"}, clientPackages...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range notLinked {
			if dep == bad || strings.HasPrefix(dep, strings.TrimSuffix(bad, "/")+"/") {
				t.Errorf("probed links %s (under %s)", dep, bad)
			}
		}
	}
}
