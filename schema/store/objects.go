package store

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
)

// A store, file or output named s3://BUCKET/KEY lies in object storage
// (package objstore): KEY names an object (a file), a prefix (a directory
// store: the objects below KEY/, by the directory rules of parquetFiles)
// or a pattern (a glob: path.Match on whole keys, "*" not crossing "/").
// KEY is a prefix when it ends with "/", or when no object has that key.

// objectContext is the context of the requests made where no caller
// passes one (Expand, footers): they end on their own (the client's
// retries are bounded).
var objectContext = context.Background()

// expandObjects is Expand for an s3:// URL.
func expandObjects(p string) ([]string, error) {
	u, err := objstore.Parse(p)
	if err != nil {
		return nil, err
	}
	c, err := objstore.Default(objectContext)
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(u.Key, "*?[") {
		if _, err := path.Match(u.Key, ""); err != nil {
			return nil, schema.Errorf(p, -1, "", "bad glob: %v", err)
		}
		out, err := Glob(p)
		if err == nil && len(out) == 0 {
			err = schema.Errorf(p, -1, "", "no object matches")
		}
		return out, err
	}
	if !strings.HasSuffix(u.Key, "/") && u.Key != "" {
		if _, err := c.Stat(objectContext, u); err == nil {
			return []string{p}, nil
		} else if !errors.Is(err, objstore.ErrNotFound) {
			return nil, err
		}
	}
	d, err := objectDir(c, p, u)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, schema.Errorf(p, -1, "", "no such object or prefix")
	}
	return dirFiles(*d)
}

// objectDir returns the tree of the objects below prefix u (nil when there
// is none).
func objectDir(c *objstore.Client, name string, u objstore.URL) (*storeDir, error) {
	objs, err := c.List(objectContext, u.Bucket, u.Prefix())
	if err != nil || len(objs) == 0 {
		return nil, err
	}
	tree := listing{}
	for _, o := range objs {
		rel := strings.TrimPrefix(o.URL.Key, u.Prefix())
		dir := "."
		for _, seg := range strings.Split(rel, "/") {
			if seg == "" {
				break // a "directory marker" object (KEY/) or an empty segment
			}
			p := path.Join(dir, seg)
			tree.add(dir, seg, p != rel)
			dir = p
		}
	}
	return &storeDir{root: name, fsys: tree, join: func(rel string) string { return u.Join(rel).String() }}, nil
}

// listing is the directory tree of a prefix's keys: the entries of each
// directory, by its path ("." the prefix).
type listing map[string][]fs.DirEntry

func (l listing) add(dir, name string, isDir bool) {
	for _, e := range l[dir] {
		if e.Name() == name {
			return
		}
	}
	l[dir] = append(l[dir], dirEntry{name, isDir})
}

// Open is fs.FS's; a listing is only read with ReadDir.
func (l listing) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
}

// ReadDir returns the entries of directory name, sorted.
func (l listing) ReadDir(name string) ([]fs.DirEntry, error) {
	es := append([]fs.DirEntry(nil), l[name]...)
	sort.Slice(es, func(i, j int) bool { return es[i].Name() < es[j].Name() })
	return es, nil
}

type dirEntry struct {
	name string
	dir  bool
}

func (e dirEntry) Name() string { return e.name }
func (e dirEntry) IsDir() bool  { return e.dir }
func (e dirEntry) Type() fs.FileMode {
	if e.dir {
		return fs.ModeDir
	}
	return 0
}
func (e dirEntry) Info() (fs.FileInfo, error) { return nil, fs.ErrInvalid }

// isObjectDir reports whether the s3:// URL p names a prefix (a directory
// store) rather than an object.
func isObjectDir(p string) bool {
	u, err := objstore.Parse(p)
	if err != nil || strings.ContainsAny(u.Key, "*?[") {
		return false
	}
	if u.Key == "" || strings.HasSuffix(u.Key, "/") {
		return true
	}
	c, err := objstore.Default(objectContext)
	if err != nil {
		return false
	}
	_, err = c.Stat(objectContext, u)
	return errors.Is(err, objstore.ErrNotFound)
}

// handle is an open input file: a local file, or an object read with
// ranged GETs (objstore.Object).
type handle interface {
	io.ReaderAt
	io.ReadSeeker
	io.Closer
	Name() string
}

// openHandle opens the input file p, an s3:// object under ctx, with the
// stamp that tells, at the end, whether it changed while it was read (an
// object's reads are all of the version opened: objstore.Object).
func openHandle(ctx context.Context, p string) (handle, fileStamp, error) {
	if !objstore.IsURL(p) {
		f, err := os.Open(p)
		if err != nil {
			return nil, fileStamp{}, fileError(p, err, "cannot open")
		}
		st, err := stampOf(f)
		if err != nil {
			f.Close()
			return nil, fileStamp{}, fileError(p, err, "cannot open")
		}
		return f, st, nil
	}
	u, err := objstore.Parse(p)
	if err != nil {
		return nil, fileStamp{}, err
	}
	c, err := objstore.Default(ctx)
	if err != nil {
		return nil, fileStamp{}, err
	}
	o, err := c.Open(ctx, u, nil)
	if err != nil {
		return nil, fileStamp{}, err
	}
	return o, fileStamp{size: o.Size(), object: true}, nil
}

// newObjectOut begins writing output p to object storage under ctx: an
// objstore.Writer, whose parts go up as it is written, completed only
// when the whole output is good.
func newObjectOut(ctx context.Context, p string) (*objstore.Writer, error) {
	u, c, err := objectOut(ctx, p)
	if err != nil {
		return nil, err
	}
	return c.Create(ctx, u), nil
}

// objectOut checks that output p names an object, and returns its URL
// and the client.
func objectOut(ctx context.Context, p string) (objstore.URL, *objstore.Client, error) {
	u, err := objstore.Parse(p)
	if err != nil {
		return u, nil, err
	}
	if u.Key == "" || strings.HasSuffix(u.Key, "/") || strings.ContainsAny(u.Key, "*?[") {
		return u, nil, schema.Errorf(p, -1, "", "output names a prefix or pattern, not an object")
	}
	c, err := objstore.Default(ctx)
	return u, c, err
}

// checkObjectWritable is CheckWritable for an s3:// path: it names an
// object, and its bucket can be listed (it exists, the credentials are
// taken).
func checkObjectWritable(p string) error {
	u, c, err := objectOut(objectContext, p)
	if err != nil {
		return err
	}
	_, err = c.List(objectContext, u.Bucket, u.Key)
	return err
}
