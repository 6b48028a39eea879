//go:build release

// Package release checks `make image`'s output: one multi-architecture OCI
// archive per image, whose linux/amd64 and linux/arm64 images hold a static
// binary of that architecture, non-root, with a CycloneDX SBOM per binary;
// and the other ways to the images: the Dockerfile's build stage, and `make
// push` to a registry that containerd then pulls from.
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type descriptor struct {
	MediaType   string                             `json:"mediaType"`
	Digest      string                             `json:"digest"`
	Platform    *struct{ Architecture, OS string } `json:"platform"`
	Annotations map[string]string                  `json:"annotations"`
}

type manifest struct {
	Manifests []descriptor `json:"manifests"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

// archive is an OCI layout read from a tar archive, blobs by digest.
type archive map[string][]byte

func readArchive(t *testing.T, path string) archive {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := archive{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return a
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if d, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
			name = "sha256:" + d
		}
		a[name] = b
	}
}

func (a archive) json(t *testing.T, key string, v any) {
	t.Helper()
	b, ok := a[key]
	if !ok {
		t.Fatalf("%s is not in the archive", key)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// fileInLayer returns the file name from a gzip'd layer.
func fileInLayer(t *testing.T, layer []byte, name string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the layer: %v", name, err)
		}
		if strings.TrimPrefix(h.Name, "./") == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

func TestReleaseImages(t *testing.T) {
	dir := release.build(t)
	const tag = releaseTag
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, name := range []string{"probed", "probed-webhook"} {
		a := readArchive(t, filepath.Join(dir, fmt.Sprintf("%s_%s.oci.tar", name, tag)))
		var top manifest
		a.json(t, "index.json", &top)
		if len(top.Manifests) != 1 || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "example.com/"+name+":"+tag {
			t.Fatalf("%s: index.json %+v, want one ref example.com/%s:%s", name, top.Manifests, name, tag)
		}
		var idx manifest
		a.json(t, top.Manifests[0].Digest, &idx)
		seen := map[string]bool{}
		for _, m := range idx.Manifests {
			arch := m.Platform.Architecture
			seen[arch] = true
			var img manifest
			a.json(t, m.Digest, &img)
			var cfg struct {
				Architecture, OS string
				Config           struct{ User string }
			}
			a.json(t, img.Config.Digest, &cfg)
			if cfg.Architecture != arch || cfg.OS != "linux" || m.Platform.OS != "linux" || cfg.Config.User != "65532:65532" {
				t.Errorf("%s %s: config %+v", name, arch, cfg)
			}
			if len(img.Layers) != 1 {
				t.Fatalf("%s %s: %d layers, want 1 (FROM scratch + the binary)", name, arch, len(img.Layers))
			}
			bin := fileInLayer(t, a[img.Layers[0].Digest], name)
			f, err := elf.NewFile(bytes.NewReader(bin))
			if err != nil {
				t.Fatalf("%s %s: not an ELF: %v", name, arch, err)
			}
			if f.Machine != machines[arch] {
				t.Errorf("%s %s: ELF machine %v, want %v", name, arch, f.Machine, machines[arch])
			}
			if f.Section(".interp") != nil {
				t.Errorf("%s %s: dynamically linked; the image has no libc", name, arch)
			}

			var sbom struct {
				BOMFormat string `json:"bomFormat"`
				Metadata  struct {
					Component struct{ Name, Version string }
				}
				Components []struct{ Name, Version string }
			}
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s_%s_linux_%s.sbom.cdx.json", name, tag, arch)))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &sbom); err != nil {
				t.Fatal(err)
			}
			var clientGo string
			for _, c := range sbom.Components {
				if c.Name == "k8s.io/client-go" {
					clientGo = c.Version
				}
			}
			if sbom.BOMFormat != "CycloneDX" || sbom.Metadata.Component.Name != "github.com/probed-dev/probed" || !strings.HasPrefix(clientGo, "v0.") {
				t.Errorf("%s %s: SBOM %s, main %+v, client-go %q", name, arch, sbom.BOMFormat, sbom.Metadata.Component, clientGo)
			}
		}
		if !seen["amd64"] || !seen["arm64"] || len(seen) != 2 {
			t.Errorf("%s: platforms %v, want amd64 and arm64", name, seen)
		}
	}
}
