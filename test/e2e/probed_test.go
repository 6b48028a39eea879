//go:build e2e

package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// testProbedStayedUp runs after the scenarios: probed itself came through the
// whole tier without a restart or a panic, and still serves its endpoints.
func testProbedStayedUp(t *testing.T) {
	ctx := context.Background()
	name, err := nd.ProbedPodName(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := client.CoreV1().Pods("probed-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			t.Errorf("probed container %s restarted %d times; last state %+v", cs.Name, cs.RestartCount, cs.LastTerminationState)
		}
		if !cs.Ready {
			t.Errorf("probed container %s is not ready", cs.Name)
		}
	}
	for _, l := range probedLogLines(ctx, "") {
		if strings.Contains(l, "panic") || strings.Contains(l, "DATA RACE") {
			t.Errorf("probed log: %s", l)
		}
	}

	metrics := nd.ProbedMetricsURL() + "/metrics"
	// The scenarios' pods are deleted as each ends: their workers, and with
	// them their series, must go; probed's own series stay. Read over TLS
	// with a token bound to deploy/'s scraper roles.
	var left []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		body, err := nd.ProbedGet(ctx, "/metrics")
		if err != nil {
			t.Logf("GET %s: %v", metrics, err)
			return false, nil
		}
		if !strings.Contains(string(body), "\nprobed_") {
			t.Errorf("%s has no probed_ series", metrics)
		}
		left = nil
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "prober_probe") && strings.Contains(l, `namespace="`+testNS+`"`) {
				left = append(left, l)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("a minute after the scenarios' pods were deleted, %s still has %d of their series, e.g. %q", metrics, len(left), left[:min(3, len(left))])
	}

	// On containerd with its CRI plugin, "auto" runs execs through
	// containerd-cri; the scenarios' exec probes, timeouts included, went there.
	body, err := nd.ProbedGet(ctx, "/metrics")
	if err != nil {
		t.Fatalf("GET %s: %v", metrics, err)
	}
	for _, outcome := range []string{"success", "nonzero_exit", "timeout"} {
		if !regexp.MustCompile(`(?m)^probed_runtime_exec_total\{[^}]*outcome="`+outcome+`"[^}]*runtime="containerd-cri"[^}]*\} [1-9]`).Match(body) &&
			!regexp.MustCompile(`(?m)^probed_runtime_exec_total\{[^}]*runtime="containerd-cri"[^}]*outcome="`+outcome+`"[^}]*\} [1-9]`).Match(body) {
			t.Errorf("%s: no exec with outcome %q counted on runtime containerd-cri", metrics, outcome)
		}
	}
}
