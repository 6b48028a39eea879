// Command ociindex turns the per-architecture images of an OCI layout into
// one multi-architecture image: it writes an image index over the images
// tagged for each platform and makes that index the layout's only tag.
// umoci builds one image per architecture but cannot write an index;
// hack/build-probed-image.sh --release calls this after it.
//
//	go run ./hack/ociindex LAYOUT REF TAG=OS/ARCH...
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	refName        = "org.opencontainers.image.ref.name"
	indexMediaType = "application/vnd.oci.image.index.v1+json"
)

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType,omitempty"`
	Manifests     []descriptor `json:"manifests"`
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: ociindex LAYOUT REF TAG=OS/ARCH...")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3:]); err != nil {
		fmt.Fprintf(os.Stderr, "ociindex: %v\n", err)
		os.Exit(1)
	}
}

func run(layout, ref string, images []string) error {
	top, err := readIndex(filepath.Join(layout, "index.json"))
	if err != nil {
		return err
	}
	byTag := map[string]descriptor{}
	for _, d := range top.Manifests {
		byTag[d.Annotations[refName]] = d
	}
	multi := index{SchemaVersion: 2, MediaType: indexMediaType}
	for _, img := range images {
		tag, plat, ok := strings.Cut(img, "=")
		osName, arch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 {
			return fmt.Errorf("%q: want TAG=OS/ARCH", img)
		}
		d, found := byTag[tag]
		if !found {
			return fmt.Errorf("no image tagged %q in %s", tag, layout)
		}
		d.Annotations = nil
		d.Platform = &platform{Architecture: arch, OS: osName}
		multi.Manifests = append(multi.Manifests, d)
	}
	blob, err := json.Marshal(multi)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(blob)
	digest := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(layout, "blobs", "sha256", digest), blob, 0o644); err != nil {
		return err
	}
	top.Manifests = []descriptor{{
		MediaType:   indexMediaType,
		Digest:      "sha256:" + digest,
		Size:        int64(len(blob)),
		Annotations: map[string]string{refName: ref},
	}}
	out, err := json.Marshal(top)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(layout, "index.json"), out, 0o644)
}

func readIndex(path string) (index, error) {
	var idx index
	b, err := os.ReadFile(path)
	if err != nil {
		return idx, err
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return idx, fmt.Errorf("%s: %w", path, err)
	}
	return idx, nil
}
