package convert

import (
	"bytes"
	"os"
	"testing"
)

// BenchmarkConvert converts a stream of 200 Deployments (the comments
// golden input, repeated).
func BenchmarkConvert(b *testing.B) {
	one, err := os.ReadFile("testdata/comments.in.yaml")
	if err != nil {
		b.Fatal(err)
	}
	src := bytes.Repeat(append([]byte("---\n"), one...), 200)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Convert(src); err != nil {
			b.Fatal(err)
		}
	}
}
