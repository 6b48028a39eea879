package execout

import (
	"bytes"
	"testing"

	"github.com/probed-dev/probed/pkg/cri"
)

func TestCappedBufferKeepsPrefixAndAcceptsAll(t *testing.T) {
	b := NewCappedBuffer(10)
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
	big := bytes.Repeat([]byte("o"), cri.MaxOutputBytes+100)
	tests := []struct {
		name           string
		stdout, stderr []byte
		want           []byte
	}{
		{"both small", []byte("out"), []byte("err"), []byte("outerr")},
		{"stdout fills", big, []byte("err"), big[:cri.MaxOutputBytes]},
		{"stderr cut", big[:cri.MaxOutputBytes-2], []byte("err"), append(append([]byte{}, big[:cri.MaxOutputBytes-2]...), "er"...)},
		{"empty", nil, nil, []byte{}},
	}
	for _, tt := range tests {
		got := Combine(tt.stdout, tt.stderr)
		if !bytes.Equal(got, tt.want) {
			t.Errorf("%s: got %d bytes, want %d", tt.name, len(got), len(tt.want))
		}
	}
}
