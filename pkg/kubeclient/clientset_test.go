package kubeclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// Each client sends its requests where client-go's typed client of the
// resource does, and decodes the answer.
func TestClientsetRequests(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			_ = json.Unmarshal(body, &tr)
			tr.Status.Authenticated = tr.Spec.Token == "t"
			_ = json.NewEncoder(w).Encode(tr)
		default:
			_ = json.NewEncoder(w).Encode(corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}})
		}
	}))
	defer srv.Close()
	cs, err := NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	force := true
	pod, err := cs.CoreV1().Pods("ns").Patch(ctx, "p", types.ApplyPatchType, []byte(`{}`), metav1.PatchOptions{FieldManager: "m", Force: &force}, "status")
	if err != nil || pod.Name != "p" {
		t.Fatalf("patch: %v %+v", err, pod)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "t"}}, metav1.CreateOptions{})
	if err != nil || !tr.Status.Authenticated {
		t.Fatalf("token review: %v %+v", err, tr)
	}
	want := []string{
		"PATCH /api/v1/namespaces/ns/pods/p/status?fieldManager=m&force=true application/apply-patch+yaml",
		"GET /api/v1/nodes/n1? ",
		"POST /apis/authentication.k8s.io/v1/tokenreviews? application/json",
	}
	if len(got) != len(want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: %q, want %q", i, got[i], want[i])
		}
	}
}

// The scheme holds the groups probed reads, and no other.
func TestSchemeOnlyProbedsGroups(t *testing.T) {
	s := NewScheme()
	for _, gv := range []schema.GroupVersion{{Version: "v1"}, {Group: "authentication.k8s.io", Version: "v1"}, {Group: "authorization.k8s.io", Version: "v1"}, {Group: "admissionregistration.k8s.io", Version: "v1"}} {
		if !s.IsVersionRegistered(gv) {
			t.Errorf("%v not registered", gv)
		}
	}
	for _, gv := range []schema.GroupVersion{{Group: "apps", Version: "v1"}, {Group: "resource.k8s.io", Version: "v1"}, {Group: "events.k8s.io", Version: "v1"}} {
		if s.IsVersionRegistered(gv) {
			t.Errorf("%v registered: probed does not read it", gv)
		}
	}
}
