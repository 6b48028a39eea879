package cri

import (
	"fmt"
	"regexp"
	"strings"
)

// Runtime types as they appear before "://" in a pod's containerStatuses[].containerID.
const (
	TypeContainerd = "containerd"
	TypeCRIO       = "cri-o"
)

// ContainerID is a runtime-qualified container ID split into its parts.
type ContainerID struct {
	// Type is TypeContainerd or TypeCRIO.
	Type string
	// ID is the runtime's own container ID.
	ID string
}

// String gives the qualified form, "<type>://<id>".
func (c ContainerID) String() string { return c.Type + "://" + c.ID }

// validID is containerd's identifier grammar (CRI-O IDs, 64 hex digits, fit it
// too). Checking it here keeps malformed input out of runtime calls and paths.
var validID = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$`)

const maxIDLength = 76 // containerd's identifier limit

// ParseContainerID splits "containerd://<id>" or "cri-o://<id>". Docker
// (dockershim) IDs and unknown runtimes are rejected with ErrUnsupportedRuntime.
func ParseContainerID(s string) (ContainerID, error) {
	typ, id, ok := strings.Cut(s, "://")
	if !ok {
		return ContainerID{}, fmt.Errorf("container ID %q: %w: want <runtime>://<id>", s, ErrInvalidContainerID)
	}
	switch typ {
	case TypeContainerd, TypeCRIO:
	case "docker":
		return ContainerID{}, fmt.Errorf("container ID %q: %w: docker (dockershim) is not supported, only containerd:// and cri-o://", s, ErrUnsupportedRuntime)
	case "":
		return ContainerID{}, fmt.Errorf("container ID %q: %w: empty runtime type", s, ErrInvalidContainerID)
	default:
		return ContainerID{}, fmt.Errorf("container ID %q: %w: runtime %q, only containerd:// and cri-o:// are supported", s, ErrUnsupportedRuntime, typ)
	}
	if id == "" {
		return ContainerID{}, fmt.Errorf("container ID %q: %w: empty ID", s, ErrInvalidContainerID)
	}
	if len(id) > maxIDLength || !validID.MatchString(id) {
		return ContainerID{}, fmt.Errorf("container ID %q: %w: malformed ID", s, ErrInvalidContainerID)
	}
	return ContainerID{Type: typ, ID: id}, nil
}
