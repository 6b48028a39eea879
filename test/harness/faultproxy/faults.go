package faultproxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Class is a kind of API request, for choosing which ones a Fault hits.
type Class uint8

const (
	// Read is a GET that is not a watch: gets and lists.
	Read Class = 1 << iota
	// Watch is a watch request (?watch=true).
	Watch
	// StatusWrite is a write to a status subresource.
	StatusWrite
	// OtherWrite is any other write (events, for instance).
	OtherWrite
	// All is every class.
	All = Read | Watch | StatusWrite | OtherWrite
)

func classify(r *http.Request) Class {
	if r.Method == http.MethodGet {
		if isWatch(r) {
			return Watch
		}
		return Read
	}
	if strings.HasSuffix(r.URL.Path, "/status") {
		return StatusWrite
	}
	return OtherWrite
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1" || strings.Contains(r.URL.Path, "/watch/")
}

// isPodList tells a list of pods (what an informer's relist sends) from a get.
func isPodList(r *http.Request) bool {
	return r.Method == http.MethodGet && !isWatch(r) && strings.HasSuffix(r.URL.Path, "/pods")
}

// Fault answers a share of the requests of some classes with an error
// instead of forwarding them.
type Fault struct {
	// Classes the fault hits; zero means All.
	Classes Class
	// Code is the HTTP status: 429, 500, 503, ...
	Code int
	// RetryAfter, when positive, is sent as the Retry-After header (seconds)
	// and as the Status's retryAfterSeconds.
	RetryAfter int
	// Share of matching requests that fail, in (0, 1]; zero means all. It is
	// deterministic: with 0.5, every second matching request fails.
	Share float64
}

// activeFault is a Fault with its running share accumulator.
type activeFault struct {
	Fault
	acc float64
}

// hit reports whether this request of class c fails. Called under Proxy.mu.
func (f *activeFault) hit(c Class) bool {
	classes := f.Classes
	if classes == 0 {
		classes = All
	}
	if classes&c == 0 {
		return false
	}
	share := f.Share
	if share <= 0 || share >= 1 {
		return true
	}
	f.acc += share
	if f.acc >= 1 {
		f.acc--
		return true
	}
	return false
}

// writeStatus answers with the metav1.Status the apiserver would send for code.
func writeStatus(w http.ResponseWriter, f Fault) {
	reason := map[int]string{
		http.StatusTooManyRequests:    "TooManyRequests",
		http.StatusServiceUnavailable: "ServiceUnavailable",
		http.StatusGatewayTimeout:     "Timeout",
	}[f.Code]
	if reason == "" {
		reason = "InternalError"
	}
	st := map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "reason": reason, "code": f.Code,
		"message": "injected by faultproxy: " + http.StatusText(f.Code),
	}
	if f.RetryAfter > 0 {
		st["details"] = map[string]any{"retryAfterSeconds": f.RetryAfter}
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	b, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Code)
	_, _ = w.Write(b)
}

// expiredEvent is the watch event an apiserver sends when it can no longer
// serve the watch from the requested resourceVersion; informers relist on it.
var expiredEvent = []byte(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},` +
	`"status":"Failure","message":"too old resource version (injected by faultproxy)","reason":"Expired","code":410}}` + "\n")
