package main

import (
	"flag"
	"testing"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/internal/docgen"
	"github.com/probed-dev/probed/pkg/gatewatch"
	"github.com/probed-dev/probed/pkg/servingcert"
)

//go:generate go test -run TestDocs -update .

var update = flag.Bool("update", false, "rewrite the generated tables of docs/flags.md and docs/observability.md")

const docsUpdateCmd = "go test ./cmd/probed-webhook/ -run TestDocs -update"

// docDefaults are the webhook's options as an empty command line leaves
// them, with the environment they read unset: the docs' defaults.
func docDefaults(t *testing.T) (*options, *pflag.FlagSet) {
	t.Helper()
	t.Setenv("POD_NAMESPACE", "")
	o := &options{}
	fs, _, _ := newFlagSet(o)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	return o, fs
}

// docs/flags.md's table of the webhook's flags is generated from its flag set.
func TestDocsFlags(t *testing.T) {
	_, fs := docDefaults(t)
	if err := docgen.Table("../../"+docgen.FlagsDoc, *update, docsUpdateCmd,
		docgen.Region{Name: "probed-webhook-flags", Body: docgen.FlagTable(fs)}, "## probed-webhook", docgen.FlagKnown(fs)); err != nil {
		t.Error(err)
	}
}

// docs/observability.md's table of the webhook's metrics is generated from
// what run registers: registerMetrics, the certificates' gauge and the
// gate monitor's, with the defaults' --manage-certs and --gate-monitor.
func TestDocsMetrics(t *testing.T) {
	o, _ := docDefaults(t)
	o.Namespace = "docs"
	if !o.ManageCerts || !o.GateMonitor {
		t.Fatal("the docs describe the defaults' metrics, which manage certificates and monitor the gate")
	}
	reg := docgen.NewRegistry()
	registerMetrics(reg)
	clk := clocktesting.NewFakeClock(time.Now())
	if _, err := servingcert.New(servingcert.Options{
		Client: fake.NewClientset(), Clock: clk, Namespace: o.Namespace, SecretName: o.SecretName,
		Config:   servingcert.Config{DNSNames: o.dnsNames(), CAValidity: o.CAValidity, CertValidity: o.CertValidity},
		Interval: o.CertInterval, Propagation: o.CAPropagation, Registerer: reg,
	}); err != nil {
		t.Fatal(err)
	}
	// A gated pod, long unanswered, on a node with no probed: both of the
	// gate monitor's gauges have a series.
	gated := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "docs", Namespace: "docs", CreationTimestamp: metav1.NewTime(clk.Now().Add(-time.Hour))},
		Spec:       v1.PodSpec{NodeName: "node", ReadinessGates: []v1.PodReadinessGate{{ConditionType: gatewatch.Gate}}},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
	reg.MustRegister(gatewatch.New(gatewatch.Options{Pods: podList{gated}, Clock: clk, Grace: o.GateGrace, Probed: o.probedPods()}))

	families, err := reg.Families("probed_")
	if err != nil {
		t.Fatal(err)
	}
	if err := docgen.Table("../../"+docgen.MetricsDoc, *update, docsUpdateCmd,
		docgen.Region{Name: "probed-webhook-metrics", Body: docgen.MetricTable(families)},
		"### The adoption webhook's metrics", docgen.FamilyKnown(families)); err != nil {
		t.Error(err)
	}
}

type podList []*v1.Pod

func (p podList) List(labels.Selector) ([]*v1.Pod, error) { return p, nil }
