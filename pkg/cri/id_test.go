package cri

import (
	"errors"
	"strings"
	"testing"
)

func TestParseContainerID(t *testing.T) {
	hex64 := strings.Repeat("ab12", 16)
	tests := []struct {
		in      string
		want    ContainerID
		wantErr error
	}{
		{in: "containerd://" + hex64, want: ContainerID{TypeContainerd, hex64}},
		{in: "cri-o://" + hex64, want: ContainerID{TypeCRIO, hex64}},
		{in: "containerd://my-ctr_1.2", want: ContainerID{TypeContainerd, "my-ctr_1.2"}},
		{in: "docker://" + hex64, wantErr: ErrUnsupportedRuntime},
		{in: "rkt://abc", wantErr: ErrUnsupportedRuntime},
		{in: hex64, wantErr: ErrInvalidContainerID},
		{in: "", wantErr: ErrInvalidContainerID},
		{in: "://abc", wantErr: ErrInvalidContainerID},
		{in: "containerd://", wantErr: ErrInvalidContainerID},
		{in: "containerd://../etc", wantErr: ErrInvalidContainerID},
		{in: "containerd://a/b", wantErr: ErrInvalidContainerID},
		{in: "containerd://a b", wantErr: ErrInvalidContainerID},
		{in: "containerd://-abc", wantErr: ErrInvalidContainerID},
		{in: "containerd://" + strings.Repeat("a", 77), wantErr: ErrInvalidContainerID},
		{in: "Containerd://abc", wantErr: ErrUnsupportedRuntime},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseContainerID(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.in) {
					t.Errorf("error %q does not name the input", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || got.String() != tt.in {
				t.Fatalf("got %+v (%s), want %+v", got, got, tt.want)
			}
		})
	}
}

func TestDockerRejectionIsClear(t *testing.T) {
	_, err := ParseContainerID("docker://abc")
	if err == nil || !strings.Contains(err.Error(), "dockershim") {
		t.Fatalf("want a message that names dockershim, got %v", err)
	}
}
