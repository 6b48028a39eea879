package prober

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestExpand walks the corner cases of Kubernetes' $(VAR) syntax.
func TestExpand(t *testing.T) {
	vars := map[string]string{
		"A":     "a",
		"B":     "b",
		"EMPTY": "",
		"REF":   "$(A)",
	}
	cases := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"$(A)", "a"},
		{"$(A)-$(A)", "a-a"},
		{"x$(A)y$(B)z", "xaybz"},
		{"$(EMPTY)", ""},
		{"pre$(EMPTY)post", "prepost"},
		{"$(REF)", "$(A)"}, // values are not expanded again
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"$(UNKNOWN)$(A)", "$(UNKNOWN)a"},
		{"$()", "$()"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$a"},
		{"$$$$(A)", "$$(A)"},
		{"$$", "$"},
		{"$$$$", "$$"},
		{"$$$$$$$(A)", "$$$a"},
		{"$$A", "$A"},
		{"$A", "$A"},
		{"${A}", "${A}"},
		{"$?_$!", "$?_$!"},
		{"$", "$"},
		{"end$", "end$"},
		{"$(A", "$(A"},
		{"$(A)$(", "a$("},
		{"$(A$(B))", "$(A$(B))"},
		{"$(A$(B)", "$(A$(B)"},
		{"--$($($(--", "--$($($(--"},
		{"$(a$$b)", "$(a$$b)"},
		{`back\$(A)`, `back\a`},
		{"(A)", "(A)"},
		{"\n", "\n"},
		{"日本$(A)語", "日本a語"},
	}
	for _, tc := range cases {
		if got := expand(tc.in, vars); got != tc.want {
			t.Errorf("expand(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestExpandCommand(t *testing.T) {
	env := []v1.EnvVar{
		{Name: "FILE", Value: "/tmp/first"},
		{Name: "FILE", Value: "/tmp/healthy"}, // the later entry wins
		{Name: "SECRET", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}},
	}
	got := expandCommand([]string{"cat", "$(FILE)", "$(SECRET)", "$(MISSING)", "$$(FILE)"}, env)
	// A valueFrom entry has no static value: like the kubelet, it expands to "".
	want := []string{"cat", "/tmp/healthy", "", "$(MISSING)", "$(FILE)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("expandCommand = %q; want %q", got, want)
	}
	if got := expandCommand(nil, env); got != nil {
		t.Errorf("expandCommand(nil) = %q; want nil", got)
	}
}
