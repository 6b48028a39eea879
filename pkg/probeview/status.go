package probeview

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/duration"
)

// StripLen is how many results the strip shows: probed keeps the last 10.
const StripLen = 10

// Strip symbols, one per result.
const (
	symSuccess = '✓'
	symFailure = '✗'
	symUnknown = '?'
	symError   = '!'
	symNone    = '·'
)

// StripLegend explains the strip's symbols.
const StripLegend = "✓ success  ✗ failure  ? unknown  ! could not run (result discarded)  · no result yet"

// Strip is the last StripLen results, oldest first, one symbol each,
// left-padded with · when there are fewer.
func Strip(history []Result) string {
	if len(history) > StripLen {
		history = history[len(history)-StripLen:]
	}
	var b strings.Builder
	for range StripLen - len(history) {
		b.WriteRune(symNone)
	}
	for _, r := range history {
		b.WriteRune(symbol(r.Result))
	}
	return b.String()
}

func symbol(result string) rune {
	switch result {
	case "success":
		return symSuccess
	case "failure":
		return symFailure
	case "error":
		return symError
	}
	return symUnknown
}

// StatusOptions says how Status prints.
type StatusOptions struct {
	// Now dates the results' ages.
	Now time.Time
	// OutputWidth cuts each result's output to this many runes (0: 80).
	OutputWidth int
}

// Status writes one row per probe (state, last counted result and how many
// times in a row, the strip, the spec) and then each probe's results,
// newest last. Probes are sorted by container, then probe type.
func Status(w io.Writer, probes []Probe, o StatusOptions) error {
	probes = slices.Clone(probes)
	slices.SortStableFunc(probes, func(a, b Probe) int {
		if c := strings.Compare(a.Container, b.Container); c != 0 {
			return c
		}
		return probeTypeOrder(a.ProbeType) - probeTypeOrder(b.ProbeType)
	})
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTAINER\tPROBE\tSTATE\tRESULT\tLAST 10\tSPEC")
	for _, p := range probes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(p.Container), printable(p.ProbeType), printable(p.State), printable(resultCell(p)), Strip(p.History), oneLine(p.Spec, 1<<16))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "(%s)\n", StripLegend)
	for _, p := range probes {
		if p.RestartDeferred != "" {
			fmt.Fprintf(w, "\n%s %s: %s\n", printable(p.Container), printable(p.ProbeType), oneLine(p.RestartDeferred, 1024))
		}
	}
	for _, p := range probes {
		if p.TLS != nil {
			fmt.Fprintf(w, "\n%s %s TLS: %s\n", printable(p.Container), printable(p.ProbeType), tlsLine(p.TLS, o.Now))
		}
	}
	for _, p := range probes {
		if len(p.History) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s %s, last %d results:\n", printable(p.Container), printable(p.ProbeType), min(len(p.History), StripLen))
		if err := history(w, p.History, o); err != nil {
			return err
		}
	}
	return nil
}

// probeTypeOrder puts a container's probes in the order they gate it.
func probeTypeOrder(t string) int {
	switch t {
	case "Startup":
		return 0
	case "Liveness":
		return 1
	case "Readiness":
		return 2
	}
	return 3
}

// resultCell is the last counted result and its run: "failure ×4"; "-"
// before the first counted result.
func resultCell(p Probe) string {
	if p.LastResult == "" {
		return "-"
	}
	return fmt.Sprintf("%s ×%d", p.LastResult, p.ResultRun)
}

func history(w io.Writer, hist []Result, o StatusOptions) error {
	if len(hist) > StripLen {
		hist = hist[len(hist)-StripLen:]
	}
	width := o.OutputWidth
	if width <= 0 {
		width = 80
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  AGE\tRESULT\tDURATION\tOUTPUT")
	for _, r := range hist {
		age := "-"
		if !r.Time.IsZero() {
			age = duration.HumanDuration(o.Now.Sub(r.Time))
		}
		out := r.Output
		if r.Error != "" {
			out = "error: " + r.Error + " " + out
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", age, printable(r.Result), roundDuration(time.Duration(r.Duration)), oneLine(out, width))
	}
	return tw.Flush()
}

// oneLine folds whitespace runs (newlines included) into single spaces,
// shows other control characters as "?" (a probe's output comes from the
// container and must not drive the reader's terminal) and cuts the result to
// width runes, marking the cut with "…".
func oneLine(s string, width int) string {
	s = printable(strings.Join(strings.Fields(s), " "))
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return string(r[:width-1]) + "…"
}

// printable replaces every rune that is not printable (control characters,
// escape sequences' ESC, invalid UTF-8) with "?".
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
}

// tlsLine words a TLS peer: who answered, whether it was verified and
// against which name, and when the certificates expire.
func tlsLine(t *TLSPeer, now time.Time) string {
	who := t.Subject
	if len(t.DNSNames) > 0 {
		who += " (" + strings.Join(t.DNSNames, ", ") + ")"
	}
	verified := "not verified (insecureSkipVerify)"
	if t.Verified {
		name := t.ServerName
		if name == "" {
			name = "the pod's address"
		}
		verified = "verified for " + name + ", issued by " + t.Issuer
	}
	line := fmt.Sprintf("%s, %s; server certificate expires %s", who, verified, expiry(t.NotAfter, now))
	if !t.ClientNotAfter.IsZero() {
		line += ", client certificate " + expiry(t.ClientNotAfter, now)
	}
	return oneLine(printable(line), 1024)
}

// expiry words when a certificate expires, relative to now.
func expiry(at, now time.Time) string {
	d := at.Sub(now).Round(time.Minute)
	if d < 0 {
		return fmt.Sprintf("%s (expired %s ago)", at.UTC().Format(time.RFC3339), -d)
	}
	return fmt.Sprintf("%s (in %s)", at.UTC().Format(time.RFC3339), d)
}
