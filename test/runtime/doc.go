// Package runtimetest is the runtime test tier: pkg/cri's two Runtime
// implementations against a real containerd and runc, through one shared set
// of conformance tests, plus exec benchmarks.
//
//	bash hack/build-images.sh && go test -race -tags runtime -v ./test/runtime/
//	go test -tags runtime -run '^$' -bench . ./test/runtime/
package runtimetest
