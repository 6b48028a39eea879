package containerd

import (
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/types/known/anypb"
)

// With the native client the IPs come from the CRI plugin's record of the
// sandbox, as containerd 1.6 to 2.x write it on the pause container.
func TestSandboxIPsOfCRIPluginRecord(t *testing.T) {
	record := func(v string) map[string]typeurl.Any {
		return map[string]typeurl.Any{criSandboxMetadataExtension: &anypb.Any{TypeUrl: "github.com/containerd/cri/pkg/store/sandbox/Metadata", Value: []byte(v)}}
	}
	for _, tc := range []struct {
		name string
		ext  map[string]typeurl.Any
		want []string
	}{
		{"dual stack", record(`{"Version":"v1","Metadata":{"ID":"sb","Name":"web","NetNSPath":"/run/netns/x","IP":"10.1.0.5","AdditionalIPs":["fd00::5"]}}`), []string{"10.1.0.5", "fd00::5"}},
		{"host network", record(`{"Version":"v1","Metadata":{"ID":"sb","IP":""}}`), nil},
		{"garbled", record(`{"Version":`), nil},
		{"no record", nil, nil},
	} {
		if got := sandboxIPsOf(containers.Container{Extensions: tc.ext}); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.want)
		}
	}
}

// Issue 36: the CRI plugin's record names the sandbox's network namespace.
func TestSandboxNetNSOfCRIPluginRecord(t *testing.T) {
	record := func(v string) map[string]typeurl.Any {
		return map[string]typeurl.Any{criSandboxMetadataExtension: &anypb.Any{TypeUrl: "github.com/containerd/cri/pkg/store/sandbox/Metadata", Value: []byte(v)}}
	}
	for _, tc := range []struct {
		name string
		ext  map[string]typeurl.Any
		want string
	}{
		{"pod network", record(`{"Version":"v1","Metadata":{"ID":"sb","NetNSPath":"/var/run/netns/cni-1","IP":"10.1.0.5"}}`), "/var/run/netns/cni-1"},
		{"host network", record(`{"Version":"v1","Metadata":{"ID":"sb","NetNSPath":""}}`), ""},
		{"garbled", record(`{"Version":`), ""},
		{"no record", nil, ""},
	} {
		if got := sandboxNetNSOf(containers.Container{Extensions: tc.ext}); got != tc.want {
			t.Errorf("%s: %q; want %q", tc.name, got, tc.want)
		}
	}
}
