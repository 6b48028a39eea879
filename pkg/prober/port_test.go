package prober

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestResolvePort(t *testing.T) {
	ports := []v1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "huge", ContainerPort: 70000}}
	cases := []struct {
		name    string
		in      intstr.IntOrString
		want    int
		wantErr string
	}{
		{"int", intstr.FromInt32(80), 80, ""},
		{"lowest", intstr.FromInt32(1), 1, ""},
		{"highest", intstr.FromInt32(65535), 65535, ""},
		{"named", intstr.FromString("http"), 8080, ""},
		// 1.37's ResolveContainerPort: a string is a name, never a number.
		{"numeric string", intstr.FromString("9090"), 0, `port "9090" not found`},
		{"unknown name", intstr.FromString("metrics"), 0, `port "metrics" not found`},
		{"zero", intstr.FromInt32(0), 0, "invalid port number: 0"},
		{"too big", intstr.FromInt32(65536), 0, "invalid port number: 65536"},
		{"named out of range", intstr.FromString("huge"), 0, "invalid port number: 70000"},
		{"no kind", intstr.IntOrString{Type: 7}, 0, "intOrString had no kind: {Type:7 IntVal:0 StrVal:}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolvePort(tc.in, ports)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("resolvePort = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
