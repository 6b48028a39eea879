//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
)

// TestWebhookAccountChangesOnlyTheCABundle (issue 20, item 7.3): the
// webhook's service account, which RBAC lets patch its two webhook
// configurations, may change their caBundle and nothing else, by
// deploy/webhook's probed-webhook-ca-bundle policy on the real API server.
// The running webhook still keeps its bundles current; an administrator is
// not held.
func TestWebhookAccountChangesOnlyTheCABundle(t *testing.T) {
	port := freePort(t)
	installWebhook(t, port)
	w := startWebhook(t, port)
	w.waitReady() // it patched the bundles it manages, as itself
	for _, b := range caBundles(t) {
		if len(b) == 0 {
			t.Fatal("a webhook has no caBundle: the webhook could not patch it")
		}
	}
	ctx := context.Background()
	token, err := cp.TokenFor(ctx, webhookNS, webhookName, "probed-webhook-it", "", "")
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(cp.ConfigForToken(token))
	if err != nil {
		t.Fatal(err)
	}
	mutating := func(c kubernetes.Interface, patch string) error {
		_, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, webhookName, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	validating := func(c kubernetes.Interface, patch string) error {
		_, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, webhookName, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	denied := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "probed-webhook-ca-bundle")
	}
	// The API server loads a new policy asynchronously: wait, with a dry run
	// that changes nothing, until it holds the webhook's account.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, last = sa.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, webhookName, types.JSONPatchType,
			[]byte(`[{"op": "add", "path": "/metadata/labels/evil", "value": "yes"}]`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return denied(last), nil
	}); err != nil {
		t.Fatalf("the probed-webhook-ca-bundle policy never held the webhook's account; last: %v", last)
	}
	for name, try := range map[string]func() error{
		"turn adoption off": func() error {
			return mutating(sa, `[{"op": "replace", "path": "/webhooks/0/rules/0/operations", "value": ["DELETE"]}]`)
		},
		"fail closed": func() error {
			return mutating(sa, `[{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Fail"}]`)
		},
		"send pods elsewhere": func() error {
			return mutating(sa, `[{"op": "replace", "path": "/webhooks/0/clientConfig/service/name", "value": "evil"}]`)
		},
		"a URL instead": func() error {
			return mutating(sa, `[{"op": "remove", "path": "/webhooks/0/clientConfig/service"}, {"op": "add", "path": "/webhooks/0/clientConfig/url", "value": "https://evil.example/adopt"}]`)
		},
		"widen the scope":        func() error { return mutating(sa, `[{"op": "remove", "path": "/webhooks/0/namespaceSelector"}]`) },
		"drop a match condition": func() error { return mutating(sa, `[{"op": "remove", "path": "/webhooks/0/matchConditions/0"}]`) },
		"reorder":                func() error { return mutating(sa, `[{"op": "move", "from": "/webhooks/0", "path": "/webhooks/1"}]`) },
		"drop a webhook":         func() error { return validating(sa, `[{"op": "remove", "path": "/webhooks/0"}]`) },
		"a longer timeout": func() error {
			return validating(sa, `[{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 30}]`)
		},
		"never reinvoke": func() error {
			return mutating(sa, `[{"op": "replace", "path": "/webhooks/0/reinvocationPolicy", "value": "Never"}]`)
		},
		"a label": func() error {
			return validating(sa, `[{"op": "add", "path": "/metadata/labels/evil", "value": "yes"}]`)
		},
		"an object selector": func() error {
			return validating(sa, `[{"op": "add", "path": "/webhooks/0/objectSelector/matchLabels", "value": {"never": "matches"}}]`)
		},
		"admission review version": func() error {
			return validating(sa, `[{"op": "replace", "path": "/webhooks/0/admissionReviewVersions", "value": ["v1beta1"]}]`)
		},
	} {
		err := try()
		if !denied(err) {
			t.Errorf("%s, as the webhook: %v; want the policy's 403", name, err)
		}
	}

	// A CA bundle it did not make, as the webhook: allowed.
	another, _, err := certutil.GenerateSelfSignedCertKey("another-ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	bundle := append(append([]byte{}, caBundles(t)[0]...), another...)
	b, _ := json.Marshal(bundle)
	if err := mutating(sa, `[{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": `+string(b)+`}]`); err != nil {
		t.Errorf("a new caBundle, as the webhook: %v", err)
	}
	// An administrator is not held.
	if err := validating(client, `[{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 3}]`); err != nil {
		t.Errorf("a longer timeout, as an administrator: %v", err)
	}
}
