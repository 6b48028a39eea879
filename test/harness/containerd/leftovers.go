package containerd

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// FIFOs lists every named pipe and every directory entry below dir (dir itself
// excluded), sorted. Tests compare it before and after an exec to prove that
// nothing was left behind.
func FIFOs(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if p != dir && (d.IsDir() || d.Type()&fs.ModeNamedPipe != 0) {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// AllFIFOs lists only the named pipes below dir, for a whole run dir where
// directories come and go with containers.
func AllFIFOs(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) || os.IsPermission(err) {
				return nil
			}
			return err
		}
		if d.Type()&fs.ModeNamedPipe != 0 {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// LiveExecs lists the exec processes the shims still track, across all
// containers: the runc shim keeps "<exec-id>.pid" in the task's bundle dir
// from exec creation until the exec is deleted. A leaked exec shows up here.
func (h *Containerd) LiveExecs() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(h.path("state"), "io.containerd.runtime.v2.task", "*", "*", "*.pid"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if filepath.Base(f) != "init.pid" {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out, nil
}
