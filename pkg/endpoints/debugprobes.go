package endpoints

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/worker"
)

// probeFilter is /debug/probes?namespace=&pod=: either, both or neither.
type probeFilter struct {
	namespace, pod string
}

// parseProbeFilter accepts only namespace and pod, once each, with values
// that could name a namespace and a pod; an empty value filters nothing.
func parseProbeFilter(q url.Values) (probeFilter, error) {
	var f probeFilter
	for k, v := range q {
		if k != "namespace" && k != "pod" {
			return f, fmt.Errorf("unknown query parameter %q: /debug/probes takes namespace and pod", k)
		}
		if len(v) > 1 {
			return f, fmt.Errorf("query parameter %q given %d times: give it once", k, len(v))
		}
	}
	f.namespace, f.pod = q.Get("namespace"), q.Get("pod")
	if f.namespace != "" {
		if errs := apivalidation.ValidateNamespaceName(f.namespace, false); len(errs) > 0 {
			return f, fmt.Errorf("namespace %q: %s", f.namespace, strings.Join(errs, "; "))
		}
	}
	if f.pod != "" {
		if errs := apivalidation.NameIsDNSSubdomain(f.pod, false); len(errs) > 0 {
			return f, fmt.Errorf("pod %q: %s", f.pod, strings.Join(errs, "; "))
		}
	}
	return f, nil
}

func (f probeFilter) match(s worker.Snapshot) bool {
	return (f.namespace == "" || s.PodNamespace == f.namespace) && (f.pod == "" || s.PodName == f.pod)
}

// debugProbes serves the workers' snapshots as JSON, filtered; a filter
// that matches nothing is an empty list, never 404.
func debugProbes(probes func() []worker.Snapshot) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			http.Error(w, fmt.Sprintf("malformed query: %v", err), http.StatusBadRequest)
			return
		}
		f, err := parseProbeFilter(q)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := []worker.Snapshot{}
		if probes != nil {
			for _, s := range probes() {
				if f.match(s) {
					out = append(out, s)
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			klog.ErrorS(err, "Encoding /debug/probes")
		}
	})
}
