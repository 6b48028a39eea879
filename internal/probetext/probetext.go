// Package probetext makes probe outputs comparable across two probers in
// tests: probed's against the kubelet's code, on the same hostile server.
// It holds what differs between two runs on the same bytes without either
// being wrong, and the kubelet's text as probed publishes it.
package probetext

import (
	"regexp"
	"strconv"
	"strings"
)

// ephemeral matches a client's own address in socket error texts, which
// differs between any two connections.
var ephemeral = regexp.MustCompile(`127\.0\.0\.1:\d+->`)

// clientTimeout matches the texts net/http gives a Client.Timeout; which of
// them a given timeout gets depends on where the race with the timer lands,
// in the kubelet as anywhere.
var clientTimeout = regexp.MustCompile(`(context deadline exceeded|net/http: request canceled( [a-z]+)*|i/o timeout)( \(Client\.Timeout[^)]*\))?`)

// notHTTP2 matches the texts net/http's HTTP/2 client gives a server that
// does not speak HTTP/2 (an h2c probe of an HTTP/1.1 server): which one
// depends on where its read lands.
var notHTTP2 = regexp.MustCompile(`http2: (client conn could not be established|frame too large|failed reading the frame payload: [^"]*)`)

// Normalise replaces what differs between two probes of the same server
// for no fault of either: ephemeral client ports, which of net/http's
// timeout texts a timeout got, which of its "not HTTP/2" texts an h2c
// probe got.
func Normalise(s string) string {
	s = ephemeral.ReplaceAllString(s, "127.0.0.1:X->")
	s = notHTTP2.ReplaceAllString(s, "<not HTTP/2>")
	return clientTimeout.ReplaceAllString(s, "<timeout>")
}

// goQuoted matches a string as %q prints it.
var goQuoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// Withheld is the kubelet's text s as probed publishes it (issue 20): after
// an HTTP transport error's `Get "URL": `, every quoted string, which is
// what net/http quoted of the response, becomes "<withheld>". Written apart
// from probed's own code, so that a test compares two implementations.
func Withheld(s string) string {
	i := strings.Index(s, "Get ")
	if i < 0 {
		return s
	}
	q, err := strconv.QuotedPrefix(s[i+len("Get "):])
	if err != nil {
		return s
	}
	start := i + len("Get ") + len(q)
	return s[:start] + goQuoted.ReplaceAllString(s[start:], `"<withheld>"`)
}
