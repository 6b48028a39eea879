package containerd

import (
	"strconv"
	"testing"
)

func TestTargetCache(t *testing.T) {
	var c targetCache
	a, b := &execTarget{}, &execTarget{}
	if c.get("x") != nil {
		t.Fatal("empty cache returned an entry")
	}
	c.put("x", a)
	if c.get("x") != a {
		t.Fatal("entry not kept")
	}
	c.drop("x", b) // another entry's drop leaves this one
	if c.get("x") != a {
		t.Fatal("drop of a different entry removed it")
	}
	c.drop("x", a)
	if c.get("x") != nil {
		t.Fatal("entry not dropped")
	}
	for i := range targetCacheMax + 1 {
		c.put(strconv.Itoa(i), a)
	}
	if n := len(c.m); n > targetCacheMax {
		t.Fatalf("cache holds %d entries; at most %d", n, targetCacheMax)
	}
}
