package controlplane_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/probed-dev/probed/test/harness/controlplane"
)

func TestZZScratch(t *testing.T) {
	dir := os.Getenv("SCRATCH_DIR")
	if dir == "" {
		t.Skip()
	}
	for i := 0; i < 3; i++ {
		os.RemoveAll(dir)
		b := time.Now()
		cp, err := controlplane.Start(context.Background(), controlplane.Options{RunDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("start %v", time.Since(b))
		b = time.Now()
		cp.StopAPIServer()
		t.Logf("stop apiserver %v", time.Since(b))
		b = time.Now()
		if err := cp.StartAPIServer(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Logf("restart %v", time.Since(b))
		b = time.Now()
		cp.Stop()
		t.Logf("stop %v", time.Since(b))
	}
}
