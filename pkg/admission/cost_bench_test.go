package admission

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
)

// BenchmarkPodCreate is the handlers' share of what the webhook adds to a
// pod create in an adopted namespace, as the API server calls them: /adopt
// (mutating), /approve-reach on the adopted pod (mutating), /validate on
// the approved pod. A Deployment's pod with a sidecar and four probes
// (webPod). It leaves out what the API server and controller-runtime add
// (TLS, HTTP, JSON of the AdmissionReview); docs/webhook.md has the whole
// pod create measured on a real API server. Run:
//
//	go test -run '^$' -bench BenchmarkPodCreate -benchmem ./pkg/admission/
func BenchmarkPodCreate(b *testing.B) {
	ctx := context.Background()
	adopter := newAdopter(prometheus.NewRegistry())
	approver := newApprover(&fakeAccess{})
	validator := &Validator{ExcludedNamespaces: []string{"kube-system"}, Metrics: NewMetrics(prometheus.NewRegistry())}
	created := mustJSON(b, webPod())
	adopt := request(admissionv1.Create, podGVK, "apps", created, nil)
	resp := adopter.Handle(ctx, adopt)
	if !resp.Allowed || len(resp.Patches) == 0 {
		b.Fatalf("adopt: %+v", resp.AdmissionResponse)
	}
	adopted := applyPatch(b, created, resp)
	approve := request(admissionv1.Create, podGVK, "apps", adopted, nil)
	resp = approver.Handle(ctx, approve)
	if !resp.Allowed || len(resp.Patches) == 0 {
		b.Fatalf("approve: %+v", resp.AdmissionResponse)
	}
	validate := request(admissionv1.Create, podGVK, "apps", applyPatch(b, adopted, resp), nil)
	if resp = validator.Handle(ctx, validate); !resp.Allowed {
		b.Fatalf("validate: %+v", resp.AdmissionResponse)
	}
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"adopt", func() { adopter.Handle(ctx, adopt) }},
		{"approve-reach", func() { approver.Handle(ctx, approve) }},
		{"validate", func() { validator.Handle(ctx, validate) }},
		{"all", func() { adopter.Handle(ctx, adopt); approver.Handle(ctx, approve); validator.Handle(ctx, validate) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.run()
			}
		})
	}
}
