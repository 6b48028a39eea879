package cri

import (
	"context"
	"strings"
	"testing"
	"time"
)

func timeDuration(ns int64) time.Duration { return time.Duration(ns) }

func TestOptionsComplete(t *testing.T) {
	o := Options{}
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	if o.Endpoint != DefaultEndpoint || o.Namespace != "k8s.io" || o.Type != TypeAuto || o.FIFODir != DefaultFIFODir {
		t.Fatalf("defaults: %+v", o)
	}
	o = Options{Endpoint: "/run/x.sock", Type: TypeCRI}
	if err := o.complete(); err != nil || o.Endpoint != "unix:///run/x.sock" {
		t.Fatalf("plain path: %+v %v", o, err)
	}
	for _, bad := range []Options{
		{Endpoint: "tcp://127.0.0.1:1"},
		{Endpoint: "relative.sock"},
		{Type: "docker"},
		{FIFODir: "fifo"},
	} {
		if err := bad.complete(); err == nil {
			t.Errorf("%+v: want an error", bad)
		}
	}
}

func TestNewAutoFailsClearlyWithoutRuntime(t *testing.T) {
	ctx := context.Background()
	_, err := New(ctx, Options{Endpoint: t.TempDir() + "/none.sock", DetectTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "detect runtime") {
		t.Fatalf("want a detection error, got %v", err)
	}
	// Explicit types connect lazily and report through Ready.
	rt, err := New(ctx, Options{Endpoint: t.TempDir() + "/none.sock", Type: TypeCRI})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := rt.Ready(rctx); err == nil {
		t.Fatal("Ready with no runtime: want an error")
	}
}
