// Package podfiles reads the files of a pod's own secret, configMap and
// projected volumes where the kubelet keeps them on the node,
// <pods dir>/<pod UID>/volumes/kubernetes.io~<kind>/<volume>/<path>, for
// probes that verify a server or present a client certificate
// (probed.io/tls, docs/tls.md).
//
// What it promises:
//   - A file is read from the named pod's named volume and nowhere else:
//     the pod UID is the API server's, the volume and path are validated
//     (probespec), and a symlink is followed only while it stays inside
//     the volume's directory.
//   - At most MaxFileBytes of a file are read; a larger file is an error.
//   - A file is read again only when it has changed: each use costs one
//     stat, so what the kubelet writes (it swaps the volume's ..data
//     symlink) is seen from the next use on, without re-reading or
//     re-parsing an unchanged file.
package podfiles

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/probespec"
)

// MaxFileBytes bounds one file: a Secret or ConfigMap holds at most 1 MiB.
const MaxFileBytes = 1 << 20

// ErrDisabled: probed was started without a pods directory
// (--pod-volumes-dir), so it reads no pod's volumes.
var ErrDisabled = errors.New("probed does not read pod volumes on this node: it runs without --pod-volumes-dir (docs/tls.md)")

// kindDirs are the kubelet's volume plugin directories.
var kindDirs = map[probespec.VolumeKind]string{
	probespec.VolumeSecret:    "kubernetes.io~secret",
	probespec.VolumeConfigMap: "kubernetes.io~configmap",
	probespec.VolumeProjected: "kubernetes.io~projected",
}

// Dir is the kubelet's pods directory. A nil or empty Dir reads nothing.
type Dir struct {
	root string
}

// New returns the Dir at root; "" disables reading.
func New(root string) *Dir {
	if root == "" {
		return nil
	}
	return &Dir{root: filepath.Clean(root)}
}

// File is one file's content and what it was read from.
type File struct {
	Data  []byte
	stamp stamp
}

// stamp tells whether a file changed: the kubelet writes a new file (a new
// inode) for every update.
type stamp struct {
	dev, ino uint64
	size     int64
	mtime    time.Time
}

func stampOf(fi os.FileInfo) stamp {
	s := stamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = uint64(st.Dev), st.Ino //nolint:unconvert // Dev's type varies by platform
	}
	return s
}

// Read returns the content of f in the pod's volume: prev itself when the
// file has not changed since prev was read (prev may be nil).
func (d *Dir) Read(uid types.UID, f *probespec.VolumeFile, prev *File) (*File, error) {
	if d == nil {
		return nil, ErrDisabled
	}
	kind, ok := kindDirs[f.Kind]
	if !ok || !pathElement(string(uid)) || !pathElement(f.Volume) {
		return nil, fmt.Errorf("volume %q: no such %s volume of this pod", f.Volume, f.Kind)
	}
	volDir := filepath.Join(d.root, string(uid), "volumes", kind, f.Volume)
	return readWithin(volDir, f.Path, fmt.Sprintf("%s volume %q", f.Kind, f.Volume), prev)
}

// pathElement reports whether s names one entry of a directory, not
// itself, its parent or a path (the API's UIDs and volume names always do).
func pathElement(s string) bool {
	return s != "" && !strings.ContainsAny(s, `/\`) && !strings.HasPrefix(s, ".")
}

// ReadPath returns the content of an absolute path of probed's own (the
// cluster CA file it trusts for the API server), as Read does.
func ReadPath(path string, prev *File) (*File, error) {
	return readWithin(filepath.Dir(path), filepath.Base(path), path, prev)
}

// readWithin reads rel inside dir, following symlinks only while they stay
// inside dir; what names dir in errors.
func readWithin(dir, rel, what string, prev *File) (*File, error) {
	p := filepath.Join(dir, rel)
	fi, err := os.Stat(p)
	if err != nil {
		return nil, notReadable(what, rel, err)
	}
	if prev != nil && stampOf(fi) == prev.stamp {
		return prev, nil
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, notReadable(what, rel, err)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, notReadable(what, rel, err)
	}
	if r, err := filepath.Rel(realDir, real); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return nil, fmt.Errorf("%s: %s leads outside the volume", what, rel)
	}
	fh, err := os.Open(real)
	if err != nil {
		return nil, notReadable(what, rel, err)
	}
	defer func() { _ = fh.Close() }()
	fi, err = fh.Stat()
	if err != nil {
		return nil, notReadable(what, rel, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %s is not a regular file", what, rel)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, notReadable(what, rel, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: %s is larger than %d bytes", what, rel, MaxFileBytes)
	}
	return &File{Data: data, stamp: stampOf(fi)}, nil
}

// notReadable words err without the node's paths, which say nothing to the
// pod's owner.
func notReadable(what, rel string, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s has no file %s (is the volume mounted, and does it hold that key?)", what, rel)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%s: %s is not readable by probed", what, rel)
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %s: %v", what, rel, err)
}
