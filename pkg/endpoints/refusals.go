package endpoints

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// The refusals' bodies are the API server's: a metav1.Status as JSON for
// 401 and 403, plain text for 500, so clients that read one read the other.

// htmlEscaper is the API server's sanitizer of texts that echo a request.
var htmlEscaper = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")

// unauthorized answers a caller that did not authenticate, on a connection
// that then closes.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
}

// forbidden answers a caller the authorizer did not allow, on a
// connection that then closes.
func forbidden(w http.ResponseWriter, a Attributes, reason string) {
	msg := htmlEscaper.Replace(fmt.Sprintf("User %q cannot %s path %q", a.User.Name, a.Verb, a.Path))
	if reason != "" {
		msg += ": " + reason
	}
	w.Header().Set("Connection", "close")
	writeStatus(w, apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("%s", msg)))
}

func internalError(w http.ResponseWriter, r *http.Request, err error) {
	http.Error(w, htmlEscaper.Replace(fmt.Sprintf("Internal Server Error: %q: %v", r.RequestURI, err)), http.StatusInternalServerError)
}

func writeStatus(w http.ResponseWriter, e *apierrors.StatusError) {
	s := e.Status()
	s.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	body, err := json.Marshal(s)
	if err != nil {
		klog.ErrorS(err, "Encoding an endpoint refusal")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(s.Code))
	_, _ = w.Write(body)
}

func tooManyReviews(w http.ResponseWriter, r *http.Request) {
	klog.V(4).InfoS("Endpoint request refused: too many reviews in flight", "path", r.URL.Path, "remote", r.RemoteAddr)
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", "1")
	http.Error(w, "Too many requests awaiting authentication; retry later", http.StatusTooManyRequests)
}
