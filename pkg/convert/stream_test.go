package convert

import "testing"

// Concat separates streams with a marker unless the next one starts with
// its own, and ends a stream without a final line break first.
func TestConcat(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"a: 1\n"}, "a: 1\n"},
		{[]string{"a: 1\n", "b: 2\n"}, "a: 1\n---\nb: 2\n"},
		{[]string{"a: 1", "b: 2\n"}, "a: 1\n---\nb: 2\n"},
		{[]string{"a: 1\n", "--- # b\nb: 2\n"}, "a: 1\n--- # b\nb: 2\n"},
		{[]string{"a: 1\n", "---\r\nb: 2\r\n"}, "a: 1\n---\r\nb: 2\r\n"},
		{[]string{"a: 1\n", "---b: 2\n"}, "a: 1\n---\n---b: 2\n"},
		{[]string{"", "b: 2\n"}, "b: 2\n"},
	} {
		in := make([][]byte, 0, len(c.in))
		for _, s := range c.in {
			in = append(in, []byte(s))
		}
		if got := string(Concat(in)); got != c.want {
			t.Errorf("Concat(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
