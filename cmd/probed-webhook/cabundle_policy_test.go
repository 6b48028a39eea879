package main

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestWebhookCABundlePolicyNamesEveryField: deploy/webhook/ca-bundle.yaml
// lets the webhook's account change a webhook's clientConfig.caBundle and
// nothing else, by comparing every other field by name (CEL cannot copy an
// object with one field changed). A field that k8s.io/api adds to a
// webhook, or to its clientConfig, fails this test until the policy
// compares it too.
func TestWebhookCABundlePolicyNamesEveryField(t *testing.T) {
	b, err := os.ReadFile("../../deploy/webhook/ca-bundle.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy := string(b)
	check := func(typ reflect.Type, prefix string, skip ...string) {
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" || slices.Contains(skip, name) {
				continue
			}
			if !strings.Contains(policy, prefix+name+" == ") {
				t.Errorf("%s.%s: ca-bundle.yaml does not compare %s%s", typ.Name(), name, prefix, name)
			}
		}
	}
	check(reflect.TypeOf(admissionregistrationv1.MutatingWebhook{}), "w.?", "name", "clientConfig")
	check(reflect.TypeOf(admissionregistrationv1.ValidatingWebhook{}), "w.?", "name", "clientConfig")
	check(reflect.TypeOf(admissionregistrationv1.WebhookClientConfig{}), "w.clientConfig.?", "caBundle")
	for _, s := range []string{"o.name == w.name", "map(w, w.name) == oldObject"} {
		if !strings.Contains(policy, s) {
			t.Errorf("ca-bundle.yaml does not compare the webhooks' names and order (%q)", s)
		}
	}
}
