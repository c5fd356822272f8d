package objstore_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/objstore/objtest"
)

// TestCache: a copy is reused while the object's ETag holds (no GET),
// fetched anew once the object is replaced (the old copy removed), and the
// least recently used copies go beyond the limit, never one in use.
func TestCache(t *testing.T) {
	srv := objtest.New(t)
	cl := client(t)
	ctx := context.Background()
	dir := t.TempDir()
	a, b := payload(3000), payload(5000)
	ua := put(t, cl, "c/a.parquet", a)
	ub := put(t, cl, "c/b.parquet", b)
	ca := &objstore.Cache{Dir: dir, Limit: 6000}
	fetch := func(ca *objstore.Cache, u objstore.URL, want []byte) string {
		t.Helper()
		p, err := ca.Fetch(ctx, cl, u)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
			t.Fatalf("copy of %s: %d bytes, want the object's %d", u, len(got), len(want))
		}
		return p
	}
	first := fetch(ca, ua, a)
	gets := srv.Requests("GET")
	if again := fetch(ca, ua, a); again != first || srv.Requests("GET") != gets {
		t.Errorf("second fetch: %s after %s, %d GETs; want the same copy, no GET", again, first, srv.Requests("GET")-gets)
	}
	a2 := payload(3001)
	put(t, cl, "c/a.parquet", a2)
	if p := fetch(ca, ua, a2); p == first {
		t.Error("a replaced object's old copy was used")
	}
	if _, err := os.Stat(first); err == nil {
		t.Error("the replaced object's old copy is left")
	}
	// Both held by ca (one query's): the limit gives way.
	fetch(ca, ub, b)
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d copies, want both in use", len(ents))
	}
	// A later query over b alone: a's copy, the least recently used, goes.
	pb := fetch(&objstore.Cache{Dir: dir, Limit: 6000}, ub, b)
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || dir+"/"+ents[0].Name() != pb {
		t.Errorf("copies %v, want b's alone", ents)
	}
}
