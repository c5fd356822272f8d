package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/objstore/objtest"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in, bucket, key string
		bad             bool
	}{
		{in: "s3://bkt/a/b.parquet", bucket: "bkt", key: "a/b.parquet"},
		{in: "S3://bkt/dir/", bucket: "bkt", key: "dir/"},
		{in: "s3://bkt", bucket: "bkt"},
		{in: "s3://bkt/a/*.parquet", bucket: "bkt", key: "a/*.parquet"},
		{in: "s3://B_d/x", bad: true},
		{in: "s3://ab/x", bad: true},
		{in: "s3://bkt/a//b", bad: true},
		{in: "s3://bkt/a/../b", bad: true},
		{in: "/local/path", bad: true},
	} {
		u, err := objstore.Parse(c.in)
		if c.bad {
			if !errors.Is(err, schema.ErrBadInput) {
				t.Errorf("Parse(%q) = %v, %v; want bad input", c.in, u, err)
			}
			continue
		}
		if err != nil || u.Bucket != c.bucket || u.Key != c.key {
			t.Errorf("Parse(%q) = %+v, %v; want %s %s", c.in, u, err, c.bucket, c.key)
		}
	}
}

func TestURLPaths(t *testing.T) {
	u, _ := objstore.Parse("s3://bkt/out/")
	if got := u.Join("part-0.parquet").String(); got != "s3://bkt/out/part-0.parquet" {
		t.Errorf("Join = %s", got)
	}
	p, _ := objstore.Parse("s3://bkt/out/part-0.parquet")
	other, _ := objstore.Parse("s3://bkt/output/x")
	if !p.Within(u) || other.Within(u) || !u.Within(u) {
		t.Errorf("Within: %v %v %v", p.Within(u), other.Within(u), u.Within(u))
	}
	g, _ := objstore.Parse("s3://bkt/in/*.parquet")
	if g.Literal() != "in/" || !g.Match("in/a.parquet") || g.Match("in/sub/a.parquet") {
		t.Errorf("glob: %q %v %v", g.Literal(), g.Match("in/a.parquet"), g.Match("in/sub/a.parquet"))
	}
}

// client returns a client of the environment objtest set, retrying fast.
func client(t *testing.T) *objstore.Client {
	t.Helper()
	c, err := objstore.FromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.Backoff = time.Millisecond
	return objstore.New(c)
}

func payload(n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(b)
	return b
}

func put(t *testing.T, c *objstore.Client, key string, data []byte) objstore.URL {
	t.Helper()
	u, _ := objstore.Parse(objtest.URL(key))
	w := c.Create(context.Background(), u)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Complete(); err != nil {
		t.Fatal(err)
	}
	return u
}

func readAll(c *objstore.Client, u objstore.URL, offs [][2]int64) ([][]byte, error) {
	o, err := c.Open(context.Background(), u, nil)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	var out [][]byte
	for _, r := range offs {
		b := make([]byte, r[1])
		if _, err := o.ReadAt(b, r[0]); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// TestReadFaults reads ranges of an object across blocks, whole, while
// the server drops connections mid-body and throttles.
func TestReadFaults(t *testing.T) {
	size := 3*objstore.BlockSize + 12345
	ranges := [][2]int64{{0, 10}, {int64(size) - 8, 8}, {objstore.BlockSize - 5, 10}, {0, int64(size)},
		{objstore.BlockSize / 2, 2 * objstore.BlockSize}, {objstore.BlockSize, int64(size) - objstore.BlockSize}}
	for _, c := range []struct {
		name  string
		fault objtest.Fault
		n     int
	}{
		{"clean", objtest.Drop, 0},
		{"dropped mid-body", objtest.Drop, 3},
		{"503 SlowDown", objtest.SlowDown, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := objtest.New(t)
			cl := client(t)
			data := payload(size)
			u := put(t, cl, "obj.bin", data)
			srv.Inject("GET", "", "obj.bin", c.fault, c.n)
			before := srv.Requests("GET")
			got, err := readAll(cl, u, ranges)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range ranges {
				if !bytes.Equal(got[i], data[r[0]:r[0]+r[1]]) {
					t.Errorf("range %v differs", r)
				}
			}
			if blocks := (size + objstore.BlockSize - 1) / objstore.BlockSize; srv.Requests("GET")-before < blocks+c.n {
				t.Errorf("%d GETs, want at least %d blocks + %d faults", srv.Requests("GET")-before, blocks, c.n)
			}
		})
	}
}

// TestReadAheadInterleaved reads two column chunks in order, in turns:
// each is read ahead as it goes on, whatever the other read in between.
func TestReadAheadInterleaved(t *testing.T) {
	srv := objtest.New(t)
	cl := client(t)
	u := put(t, cl, "cols.bin", payload(12*objstore.BlockSize))
	o, err := cl.Open(context.Background(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	before := srv.Requests("GET")
	buf := make([]byte, 16<<10)
	for _, block := range []int64{4, 8, 5} { // chunk A, chunk B, chunk A's next block
		if _, err := o.ReadAt(buf, block*objstore.BlockSize); err != nil {
			t.Fatal(err)
		}
	}
	// Blocks 4, 8 and 5 read, 6 and 7 read ahead of chunk A.
	want := 3 + objstore.ReadAhead
	for deadline := time.Now().Add(10 * time.Second); srv.Requests("GET")-before < want && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := srv.Requests("GET") - before; got != want {
		t.Errorf("%d GETs, want %d: the blocks read and %d ahead of the chunk read in order", got, want, objstore.ReadAhead)
	}
}

// TestUploadFaults uploads a several-part object while parts' connections
// drop and the server throttles: the object is whole, and invisible
// until Complete.
func TestUploadFaults(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault objtest.Fault
		n     int
	}{
		{"dropped mid-upload", objtest.Drop, 2},
		{"503 SlowDown", objtest.SlowDown, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := objtest.New(t)
			cl := client(t)
			data := payload(objstore.PartSize + 1000)
			u, _ := objstore.Parse(objtest.URL("up.bin"))
			srv.Inject("PUT", "partNumber", "up.bin", c.fault, c.n)
			up := cl.Create(context.Background(), u)
			if _, err := up.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := up.Finish(); err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Stat(context.Background(), u); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("before Complete: Stat = %v, want not found", err)
			}
			if err := up.Complete(); err != nil {
				t.Fatal(err)
			}
			got, err := cl.Get(context.Background(), u)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("Get: %d bytes, %v; want the %d uploaded", len(got), err, len(data))
			}
			if left := srv.Uploads(t); len(left) != 0 {
				t.Errorf("uploads left: %v", left)
			}
		})
	}
}

// TestUploadStreamed: the parts of an object go up while it is written,
// at most PartsInFlight at once (the writer holds no more), and the
// object appears whole at Complete; an empty object too.
func TestUploadStreamed(t *testing.T) {
	srv := objtest.New(t)
	cl := client(t)
	u, _ := objstore.Parse(objtest.URL("streamed.bin"))
	data := payload(3*objstore.PartSize + 5)
	up := cl.Create(context.Background(), u)
	if _, err := up.Write(data[:2*objstore.PartSize+7]); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); srv.Requests("PUT") < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := srv.Requests("PUT"); n != 2 {
		t.Errorf("%d parts sent while the object was written, want the 2 filled", n)
	}
	if at, _ := up.Seek(0, io.SeekCurrent); at != 2*objstore.PartSize+7 {
		t.Errorf("offset %d, want %d", at, 2*objstore.PartSize+7)
	}
	if _, err := up.Seek(0, io.SeekStart); err == nil {
		t.Error("a streamed object moved back")
	}
	if _, err := up.Write(data[2*objstore.PartSize+7:]); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Stat(context.Background(), u); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("before Complete: Stat = %v, want not found", err)
	}
	if err := up.Complete(); err != nil {
		t.Fatal(err)
	}
	if got, err := cl.Get(context.Background(), u); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	empty, _ := objstore.Parse(objtest.URL("empty.bin"))
	if err := cl.Create(context.Background(), empty).Complete(); err != nil {
		t.Fatal(err)
	}
	if got, err := cl.Get(context.Background(), empty); err != nil || len(got) != 0 {
		t.Errorf("empty object: %d bytes, %v", len(got), err)
	}
}

func TestUploadAbort(t *testing.T) {
	srv := objtest.New(t)
	cl := client(t)
	u, _ := objstore.Parse(objtest.URL("gone.bin"))
	up := cl.Create(context.Background(), u)
	if _, err := up.Write(payload(objstore.PartSize + 1000)); err != nil {
		t.Fatal(err)
	}
	if left := srv.Uploads(t); len(left) != 1 {
		t.Fatalf("uploads in progress: %v, want one", left)
	}
	up.Abort()
	if _, err := cl.Stat(context.Background(), u); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("after Abort: Stat = %v, want not found", err)
	}
	if left := srv.Uploads(t); len(left) != 0 {
		t.Errorf("uploads left after Abort: %v", left)
	}
	// A cancelled upload fails with the cancellation; Abort leaves nothing.
	srv.Inject("PUT", "partNumber", "gone.bin", objtest.SlowDown, -1)
	ctx, cancel := context.WithCancel(context.Background())
	up = cl.Create(ctx, u)
	if _, err := up.Write(payload(objstore.PartSize + 1000)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := up.Finish(); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled upload: Finish = %v", err)
	}
	up.Abort()
	if left := srv.Uploads(t); len(left) != 0 {
		t.Errorf("uploads left after cancel: %v", left)
	}
}

// TestPutNew races writers of one object: exactly one wins.
func TestPutNew(t *testing.T) {
	objtest.New(t)
	cl := client(t)
	u, _ := objstore.Parse(objtest.URL("plan.json"))
	var wins, lost int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cl.PutNew(context.Background(), u, []byte{byte('a' + i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, objstore.ErrExists):
				lost++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || lost != 7 {
		t.Errorf("%d writers won, %d lost; want 1 and 7", wins, lost)
	}
}

// TestRefusals: wrong credentials, a missing bucket, a denied key, a
// missing object are one line of bad input naming the URL, with no
// secret in it.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		name, url, want string
		setup           func(*objtest.Server, *testing.T)
	}{
		{"wrong credentials", objtest.URL("x"), "refused the credentials", func(_ *objtest.Server, t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGKEY")
		}},
		{"missing bucket", "s3://no-such-bucket/x", "no such bucket", nil},
		{"denied key", objtest.URL("secret/x"), "access denied", func(s *objtest.Server, _ *testing.T) {
			s.Inject("", "", "secret/", objtest.Deny, -1)
		}},
		{"missing object", objtest.URL("none"), "no such object", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := objtest.New(t)
			t.Setenv("AWS_SESSION_TOKEN", "SessionTokenSecret")
			if c.setup != nil {
				c.setup(srv, t)
			}
			cl := client(t)
			u, _ := objstore.Parse(c.url)
			var errs []error
			_, err := cl.Open(context.Background(), u, nil)
			errs = append(errs, err)
			err = cl.Create(context.Background(), u).Complete()
			if c.name != "missing object" {
				errs = append(errs, err)
			}
			for _, err := range errs {
				msg := err.Error()
				if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(msg, c.url) || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
					t.Errorf("error %q: want one line of bad input naming %s, saying %q", msg, c.url, c.want)
				}
				for _, secret := range []string{objtest.SecretKey, "SessionTokenSecret", "Signature", "X-Amz-", "http://"} {
					if strings.Contains(msg, secret) {
						t.Errorf("error %q shows %q", msg, secret)
					}
				}
			}
		})
	}
}

// TestChanged: an object replaced while it is read fails the read.
func TestChanged(t *testing.T) {
	objtest.New(t)
	cl := client(t)
	u := put(t, cl, "v.bin", payload(objstore.BlockSize+10))
	o, err := cl.Open(context.Background(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	put(t, cl, "v.bin", payload(objstore.BlockSize+11))
	if _, err := o.ReadAt(make([]byte, 10), 0); !errors.Is(err, objstore.ErrChanged) || !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("read of a replaced object = %v, want ErrChanged", err)
	}
}
