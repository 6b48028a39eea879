package endpoints

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// readiness answers /readyz. The plain path is open, for the kubelet's
// probe: it names each check and whether it passes, never why one fails,
// since an error text can carry socket paths, addresses and the API
// server's or runtime's own words, and anyone who reaches the node may ask
// (kube-apiserver's /readyz withholds its reasons the same way).
// /readyz?verbose gives the reasons to a caller authorized to get /readyz,
// and a check's failure and recovery are logged when they change.
type readiness struct {
	checks []Check
	mu     sync.Mutex
	last   map[string]string // the last error text of each check; absent: passing
}

// handler serves /readyz, and /readyz?verbose through guard.
func (rd *readiness) handler(guard func(http.Handler) http.Handler) http.Handler {
	verbose := guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rd.serve(w, r, true) }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.URL.Query()["verbose"]; ok {
			verbose.ServeHTTP(w, r)
			return
		}
		rd.serve(w, r, false)
	})
}

func (rd *readiness) serve(w http.ResponseWriter, r *http.Request, verbose bool) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	failed := false
	var body []byte
	for _, c := range rd.checks {
		err := c.Fn(ctx)
		rd.note(c.Name, err)
		switch {
		case err == nil:
			body = fmt.Appendf(body, "[+] %s ok\n", c.Name)
		case verbose:
			failed = true
			body = fmt.Appendf(body, "[-] %s: %v\n", c.Name, err)
		default:
			failed = true
			body = fmt.Appendf(body, "[-] %s failed: reason withheld\n", c.Name)
		}
	}
	if failed {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write(body)
}

// note logs a check's error when it differs from the last one seen, and its
// recovery.
func (rd *readiness) note(name string, err error) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	prev, wasFailing := rd.last[name]
	switch {
	case err == nil && wasFailing:
		delete(rd.last, name)
		klog.InfoS("Readiness check passes again", "check", name)
	case err != nil && (!wasFailing || prev != err.Error()):
		if rd.last == nil {
			rd.last = map[string]string{}
		}
		rd.last[name] = err.Error()
		klog.InfoS("Readiness check fails", "check", name, "err", err)
	}
}
