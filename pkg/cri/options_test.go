package cri

import (
	"testing"
)

func TestOptionsComplete(t *testing.T) {
	o := Options{}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if o.Endpoint != DefaultEndpoint || o.Namespace != "k8s.io" || o.Type != TypeAuto || o.FIFODir != DefaultFIFODir {
		t.Fatalf("defaults: %+v", o)
	}
	o = Options{Endpoint: "/run/x.sock", Type: TypeCRI}
	if err := o.Complete(); err != nil || o.Endpoint != "unix:///run/x.sock" {
		t.Fatalf("plain path: %+v %v", o, err)
	}
	for _, bad := range []Options{
		{Endpoint: "tcp://127.0.0.1:1"},
		{Endpoint: "relative.sock"},
		{Type: "docker"},
		{FIFODir: "fifo"},
	} {
		if err := bad.Complete(); err == nil {
			t.Errorf("%+v: want an error", bad)
		}
	}
}
