//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the webhook adds to a pod create, on the real API server over real
// TLS, and what it costs in memory. It measures and prints; it asserts only
// that the two phases really ran with and without the webhook (speed goals
// belong to benchmarks, not to assertions):
//
//	flock -o /tmp/probed-heavy.lock go test -count=1 -tags integration \
//	    -run TestWebhookAdmissionCost -v ./test/integration/
//
// The webhook is the shipped build (no race detector). Pods are created one
// at a time by one client, in rounds that alternate between the webhook
// configurations registered and deleted, so that both see the same API
// server, etcd and machine load. WEBHOOK_COST_CREATES sets the creates per
// round (default 100; 2 rounds each way).
func TestWebhookAdmissionCost(t *testing.T) {
	perRound := 100
	if v := os.Getenv("WEBHOOK_COST_CREATES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("WEBHOOK_COST_CREATES=%q", v)
		}
		perRound = n
	}
	port := freePort(t)
	installWebhook(t, port)
	w := startWebhookBinary(t, buildWebhookBinary(t, false), port)
	w.waitReady()
	ctx := context.Background()
	ns := labelledNamespace(t, "wh-cost", true)
	t.Cleanup(func() {
		_ = client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}, metav1.ListOptions{})
	})

	// The configurations as the webhook completed them (caBundle in).
	mwc, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vwc, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	register := func(on bool) {
		t.Helper()
		if on {
			m, v := mwc.DeepCopy(), vwc.DeepCopy()
			m.ResourceVersion, v.ResourceVersion = "", ""
			if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, webhookName, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, webhookName, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// The API server sees configurations through a watch: wait until
		// a create shows the new state.
		i := 0
		eventually(t, fmt.Sprintf("the webhook registered=%v in effect", on), 30*time.Second, func() bool {
			i++
			p, err := client.CoreV1().Pods(ns).Create(ctx, probedPod(fmt.Sprintf("switch-%v-%d-%d", on, time.Now().UnixNano(), i)), metav1.CreateOptions{})
			return err == nil && (adopted(p) == "") == on
		})
	}

	var with, without []time.Duration
	seq := 0
	round := func(on bool) {
		for range perRound {
			seq++
			start := time.Now()
			p, err := client.CoreV1().Pods(ns).Create(ctx, probedPod(fmt.Sprintf("cost-%d", seq)), metav1.CreateOptions{})
			d := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if (adopted(p) == "") != on {
				t.Fatalf("pod %s: registered=%v but adopted=%v", p.Name, on, adopted(p) == "")
			}
			if on {
				with = append(with, d)
			} else {
				without = append(without, d)
			}
		}
	}
	// Warm up both paths (connections, TLS sessions, caches) unmeasured.
	for range 20 {
		seq++
		if _, err := client.CoreV1().Pods(ns).Create(ctx, probedPod(fmt.Sprintf("warm-%d", seq)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Registered now: off, on, off, on.
	for _, on := range []bool{false, true, false, true} {
		register(on)
		round(on)
	}

	pw, pwo := percentiles(with), percentiles(without)
	rss, hwm := procStatus(t, w.PID(), "VmRSS"), procStatus(t, w.PID(), "VmHWM")
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod create latency, %d creates each way, one client, sequential:", len(with))
	t.Logf("  with the webhook:    p50 %v  p90 %v  p99 %v  max %v", pw[0], pw[1], pw[2], pw[3])
	t.Logf("  without the webhook: p50 %v  p90 %v  p99 %v  max %v", pwo[0], pwo[1], pwo[2], pwo[3])
	t.Logf("  added by the webhook: p50 %v  p99 %v", pw[0]-pwo[0], pw[2]-pwo[2])
	t.Logf("webhook memory: RSS %s, peak RSS %s (gate monitor caching %d pods)", rss, hwm, len(pods.Items))
	if code, body := w.get(w.metrics, "/metrics"); code == 200 {
		t.Logf("webhook's own handling time (controller-runtime histogram):\n%s", grep(body, "controller_runtime_webhook_latency_seconds_"))
	}
}

// percentiles returns p50, p90, p99 and the maximum of ds.
func percentiles(ds []time.Duration) [4]time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration {
		return s[min(len(s)-1, int(q*float64(len(s))))].Round(10 * time.Microsecond)
	}
	return [4]time.Duration{at(0.50), at(0.90), at(0.99), s[len(s)-1].Round(10 * time.Microsecond)}
}

// procStatus returns a field of /proc/<pid>/status, e.g. "VmRSS" → "31456 kB".
func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
