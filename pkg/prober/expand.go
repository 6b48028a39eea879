package prober

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// expandCommand substitutes $(VAR) references in an exec probe's command
// with the container's env values, as the kubelet's
// ExpandContainerCommandOnlyStatic does. Only the literal Value of each
// entry counts: an entry set through valueFrom has an empty Value and so
// expands to "", exactly as in the kubelet. Later entries win over earlier
// ones of the same name. Unknown references are left as written.
func expandCommand(cmd []string, env []v1.EnvVar) []string {
	if len(cmd) == 0 {
		return nil
	}
	vars := make(map[string]string, len(env))
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	out := make([]string, len(cmd))
	for i, arg := range cmd {
		out[i] = expand(arg, vars)
	}
	return out
}

// expand rewrites one string with Kubernetes' $(VAR) syntax:
//
//	$(NAME)  the value of NAME, or "$(NAME)" verbatim when NAME is unknown
//	$$       a literal "$", so "$$(NAME)" yields "$(NAME)" unexpanded
//	$(       with no closing ")" is kept verbatim
//	$x       any other "$" is kept, with the character after it
//
// Values are inserted as they are; they are not expanded again.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		next := s[i+1]
		switch next {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				// No closer: emit "$(" and carry on scanning after it.
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(")
				b.WriteString(name)
				b.WriteByte(')')
			}
			i += 2 + end
		default:
			b.WriteByte('$')
			b.WriteByte(next)
			i++
		}
	}
	return b.String()
}
