package cri

import (
	"bytes"
	"testing"
)

func TestCappedBufferKeepsPrefixAndAcceptsAll(t *testing.T) {
	b := newCappedBuffer(10)
	for i := 0; i < 5; i++ {
		n, err := b.Write([]byte("abcd"))
		if n != 4 || err != nil {
			t.Fatalf("Write = %d, %v; want 4, nil so the copier keeps draining", n, err)
		}
	}
	if got := string(b.Bytes()); got != "abcdabcdab" {
		t.Fatalf("got %q", got)
	}
	if cap(b.buf) > 32 {
		t.Errorf("buffer grew to %d bytes", cap(b.buf))
	}
}

func TestCombineOutput(t *testing.T) {
	big := bytes.Repeat([]byte("o"), MaxOutputBytes+100)
	tests := []struct {
		name           string
		stdout, stderr []byte
		want           []byte
	}{
		{"both small", []byte("out"), []byte("err"), []byte("outerr")},
		{"stdout fills", big, []byte("err"), big[:MaxOutputBytes]},
		{"stderr cut", big[:MaxOutputBytes-2], []byte("err"), append(append([]byte{}, big[:MaxOutputBytes-2]...), "er"...)},
		{"empty", nil, nil, []byte{}},
	}
	for _, tt := range tests {
		got := combineOutput(tt.stdout, tt.stderr)
		if !bytes.Equal(got, tt.want) {
			t.Errorf("%s: got %d bytes, want %d", tt.name, len(got), len(tt.want))
		}
	}
}

func TestCeilSeconds(t *testing.T) {
	for d, want := range map[int64]int64{0: 0, -1: 0, 1: 1, 999e6: 1, 1e9: 1, 1e9 + 1: 2, 30e9: 30} {
		if got := ceilSeconds(timeDuration(d)); got != want {
			t.Errorf("ceilSeconds(%d) = %d, want %d", d, got, want)
		}
	}
}
