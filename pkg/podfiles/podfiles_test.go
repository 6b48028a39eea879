package podfiles_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/podfiles"
	"github.com/probed-dev/probed/pkg/probespec"
)

const uid = types.UID("0b7e3c1a-5f7d-4a51-9c1e-2f7c1d9a6e42")

// atomicWrite lays files out in volDir as the kubelet's atomic writer
// does: they live in a ..2026_<gen> directory, ..data points to it (swapped
// by a rename), and each key is a symlink through ..data. The previous
// generation's directory is removed, as the kubelet does.
func atomicWrite(t *testing.T, volDir, gen string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(volDir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(volDir, "..data"))
	ts := "..2026_" + gen
	for name, data := range files {
		p := filepath.Join(volDir, ts, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(volDir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(volDir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		top := strings.SplitN(name, "/", 2)[0]
		link := filepath.Join(volDir, top)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", top), link); err != nil {
			t.Fatal(err)
		}
	}
	if old != "" && old != ts {
		if err := os.RemoveAll(filepath.Join(volDir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// podVolume returns the pods dir root, a Dir over it, and the directory of
// the pod's volume vol of kind.
func podVolume(t *testing.T, kind, vol string) (root string, d *podfiles.Dir, volDir string) {
	t.Helper()
	root = t.TempDir()
	return root, podfiles.New(root), filepath.Join(root, string(uid), "volumes", kind, vol)
}

func secretFile(vol, path string) *probespec.VolumeFile {
	return &probespec.VolumeFile{Volume: vol, Kind: probespec.VolumeSecret, Path: path}
}

func TestReadEachKind(t *testing.T) {
	for _, tc := range []struct {
		kind probespec.VolumeKind
		dir  string
	}{
		{probespec.VolumeSecret, "kubernetes.io~secret"},
		{probespec.VolumeConfigMap, "kubernetes.io~configmap"},
		{probespec.VolumeProjected, "kubernetes.io~projected"},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			_, d, volDir := podVolume(t, tc.dir, "certs")
			atomicWrite(t, volDir, "01_01", map[string][]byte{"ca.crt": []byte("ca one"), "sub/tls.crt": []byte("nested")})
			f, err := d.Read(uid, &probespec.VolumeFile{Volume: "certs", Kind: tc.kind, Path: "ca.crt"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(f.Data) != "ca one" {
				t.Errorf("Data = %q; want %q", f.Data, "ca one")
			}
			f, err = d.Read(uid, &probespec.VolumeFile{Volume: "certs", Kind: tc.kind, Path: "sub/tls.crt"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(f.Data) != "nested" {
				t.Errorf("Data = %q; want %q", f.Data, "nested")
			}
		})
	}
}

// TestReadUnchangedIsNotReread: an unchanged file gives back prev itself.
// The file is rewritten in place (same inode, size and mtime, other bytes):
// a Read that read it again would see the new bytes.
func TestReadUnchangedIsNotReread(t *testing.T) {
	_, d, volDir := podVolume(t, "kubernetes.io~secret", "certs")
	atomicWrite(t, volDir, "01_01", map[string][]byte{"ca.crt": []byte("AAAA")})
	vf := secretFile("certs", "ca.crt")
	prev, err := d.Read(uid, vf, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got, err := d.Read(uid, vf, prev)
		if err != nil {
			t.Fatal(err)
		}
		if got != prev {
			t.Fatalf("Read of an unchanged file = %p; want prev %p", got, prev)
		}
	}

	real := filepath.Join(volDir, "..2026_01_01", "ca.crt")
	fi, err := os.Stat(real)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(real, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("BBBB"), 0); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(real, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	got, err := d.Read(uid, vf, prev)
	if err != nil {
		t.Fatal(err)
	}
	if got != prev || string(got.Data) != "AAAA" {
		t.Errorf("Read = %p %q; want prev %p, not re-read", got, got.Data, prev)
	}
	// Without prev it is read.
	if got, err := d.Read(uid, vf, nil); err != nil || string(got.Data) != "BBBB" {
		t.Errorf("Read without prev = %v; want the file's bytes", err)
	}
}

// TestReadAtomicSwap: swapping ..data gives the new content from the next
// Read on.
func TestReadAtomicSwap(t *testing.T) {
	_, d, volDir := podVolume(t, "kubernetes.io~secret", "certs")
	atomicWrite(t, volDir, "01_01", map[string][]byte{"ca.crt": []byte("old CA")})
	vf := secretFile("certs", "ca.crt")
	prev, err := d.Read(uid, vf, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The same size, so only the inode tells them apart.
	atomicWrite(t, volDir, "01_02", map[string][]byte{"ca.crt": []byte("new CA")})
	got, err := d.Read(uid, vf, prev)
	if err != nil {
		t.Fatal(err)
	}
	if got == prev || string(got.Data) != "new CA" {
		t.Fatalf("Read after the swap = %q (prev: %v); want the new content", got.Data, got == prev)
	}
	if again, err := d.Read(uid, vf, got); err != nil || again != got {
		t.Errorf("Read after the swap, unchanged = %v, same %v; want the same File", err, again == got)
	}
}

// TestReadRefusesSymlinkOutside: a key that leads outside its volume, to
// another volume or anywhere on the node, is not read.
func TestReadRefusesSymlinkOutside(t *testing.T) {
	root, d, volDir := podVolume(t, "kubernetes.io~secret", "certs")
	atomicWrite(t, volDir, "01_01", map[string][]byte{"ca.crt": []byte("ok")})
	other := filepath.Join(filepath.Dir(volDir), "other")
	atomicWrite(t, other, "01_01", map[string][]byte{"tls.key": []byte("another volume's key")})
	outside := filepath.Join(t.TempDir(), "node-secret")
	if err := os.WriteFile(outside, []byte("node's"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"abs.crt":     outside,
		"rel.crt":     "../other/tls.key",
		"viadata.crt": "..data/../../other/tls.key",
	} {
		if err := os.Symlink(target, filepath.Join(volDir, name)); err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			f, err := d.Read(uid, secretFile("certs", name), nil)
			if err == nil {
				t.Fatalf("Read = %q; want an error", f.Data)
			}
			if !strings.Contains(err.Error(), "leads outside the volume") {
				t.Errorf("error %q; want it to say the file leads outside the volume", err)
			}
			for _, p := range []string{root, outside} {
				if strings.Contains(err.Error(), p) {
					t.Errorf("error %q names the node's path %s", err, p)
				}
			}
		})
	}
	// A valid prev does not let a link that now leads outside through.
	vf := secretFile("certs", "ca.crt")
	prev, err := d.Read(uid, vf, nil)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(volDir, "ca.crt")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if f, err := d.Read(uid, vf, prev); err == nil {
		t.Errorf("Read with prev after the link moved outside = %q; want an error", f.Data)
	}
}

func TestReadSizeLimit(t *testing.T) {
	_, d, volDir := podVolume(t, "kubernetes.io~configmap", "big")
	atomicWrite(t, volDir, "01_01", map[string][]byte{
		"max.pem":  bytes.Repeat([]byte("x"), podfiles.MaxFileBytes),
		"over.pem": bytes.Repeat([]byte("x"), podfiles.MaxFileBytes+1),
	})
	vf := func(p string) *probespec.VolumeFile {
		return &probespec.VolumeFile{Volume: "big", Kind: probespec.VolumeConfigMap, Path: p}
	}
	if f, err := d.Read(uid, vf("max.pem"), nil); err != nil || len(f.Data) != podfiles.MaxFileBytes {
		t.Errorf("Read of a MaxFileBytes file = %v; want its %d bytes", err, podfiles.MaxFileBytes)
	}
	_, err := d.Read(uid, vf("over.pem"), nil)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Read of a file over MaxFileBytes = %v; want it refused", err)
	}
}

// TestReadErrorsNameNoNodePath: errors name the pod's volume and the path
// in it, never where the node keeps them.
func TestReadErrorsNameNoNodePath(t *testing.T) {
	root, d, volDir := podVolume(t, "kubernetes.io~secret", "certs")
	atomicWrite(t, volDir, "01_01", map[string][]byte{"ca.crt": []byte("ok"), "dir/x": []byte("x")})
	for _, tc := range []struct {
		vf   *probespec.VolumeFile
		want []string
	}{
		{secretFile("certs", "tls.crt"), []string{`secret volume "certs"`, "tls.crt", "has no file"}},
		{secretFile("unmounted", "ca.crt"), []string{`secret volume "unmounted"`, "ca.crt", "has no file"}},
		{&probespec.VolumeFile{Volume: "certs", Kind: probespec.VolumeProjected, Path: "ca.crt"}, []string{`projected volume "certs"`, "ca.crt"}},
		{secretFile("certs", "dir"), []string{`secret volume "certs"`, "dir", "not a regular file"}},
	} {
		_, err := d.Read(uid, tc.vf, nil)
		if err == nil {
			t.Errorf("Read(%+v) = nil error", tc.vf)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Read(%+v) error %q; want it to contain %q", tc.vf, err, w)
			}
		}
		for _, p := range []string{root, string(uid), "kubernetes.io~"} {
			if strings.Contains(err.Error(), p) {
				t.Errorf("Read(%+v) error %q names the node's path (%s)", tc.vf, err, p)
			}
		}
	}
}

// TestReadRefusesBadUID: a UID that could name another directory reads
// nothing.
func TestReadRefusesBadUID(t *testing.T) {
	_, d, volDir := podVolume(t, "kubernetes.io~secret", "certs")
	atomicWrite(t, volDir, "01_01", map[string][]byte{"ca.crt": []byte("ok")})
	for _, u := range []types.UID{"", "..", "../" + uid, uid + "/..", `a\b`} {
		if f, err := d.Read(u, secretFile("certs", "ca.crt"), nil); err == nil {
			t.Errorf("Read(uid %q) = %q; want an error", u, f.Data)
		}
	}
	if f, err := d.Read(uid, &probespec.VolumeFile{Volume: "certs", Kind: "hostPath", Path: "ca.crt"}, nil); err == nil {
		t.Errorf("Read of a hostPath volume = %q; want an error", f.Data)
	}
}

func TestDisabled(t *testing.T) {
	for name, d := range map[string]*podfiles.Dir{"nil": nil, `New("")`: podfiles.New("")} {
		if _, err := d.Read(uid, secretFile("certs", "ca.crt"), nil); !errors.Is(err, podfiles.ErrDisabled) {
			t.Errorf("%s Dir: Read error %v; want ErrDisabled", name, err)
		}
	}
}

// TestReadPath: probed's own file (the cluster CA), kept as a service
// account volume keeps it, is read again only after a swap.
func TestReadPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "serviceaccount")
	atomicWrite(t, dir, "01_01", map[string][]byte{"ca.crt": []byte("cluster one")})
	p := filepath.Join(dir, "ca.crt")
	prev, err := podfiles.ReadPath(p, nil)
	if err != nil || string(prev.Data) != "cluster one" {
		t.Fatalf("ReadPath = %v", err)
	}
	if got, err := podfiles.ReadPath(p, prev); err != nil || got != prev {
		t.Errorf("ReadPath unchanged = %v, same %v; want prev", err, got == prev)
	}
	atomicWrite(t, dir, "01_02", map[string][]byte{"ca.crt": []byte("cluster two")})
	if got, err := podfiles.ReadPath(p, prev); err != nil || string(got.Data) != "cluster two" {
		t.Errorf("ReadPath after the swap = %v; want the new content", err)
	}
	if _, err := podfiles.ReadPath(filepath.Join(dir, "gone.crt"), nil); err == nil {
		t.Error("ReadPath of a missing file: no error")
	}
}
