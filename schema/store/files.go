package store

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/rftpipe/rftpipe/schema/objstore"
)

// The small files beside a store's parts (a shard plan, part metrics) are
// read, listed, created and removed through these, on a local disk or in
// object storage alike; a file that is not there is os.ErrNotExist either
// way.

// ReadFile returns the contents of the file (or object) at p.
func ReadFile(p string) ([]byte, error) {
	if !objstore.IsURL(p) {
		return os.ReadFile(p)
	}
	c, u, err := object(p)
	if err != nil {
		return nil, err
	}
	return c.Get(objectContext, u)
}

// ReadDir returns the names of the entries of directory dir (for a prefix:
// of the objects and sub-prefixes right below it), sorted.
func ReadDir(dir string) ([]string, error) {
	if !objstore.IsURL(dir) {
		ents, err := os.ReadDir(dir)
		names := make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name()
		}
		return names, err
	}
	c, u, err := object(dir)
	if err != nil {
		return nil, err
	}
	objs, err := c.List(objectContext, u.Bucket, u.Prefix())
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, &os.PathError{Op: "list", Path: dir, Err: os.ErrNotExist}
	}
	var names []string
	for _, o := range objs {
		name, _, _ := strings.Cut(strings.TrimPrefix(o.URL.Key, u.Prefix()), "/")
		if name != "" && (len(names) == 0 || names[len(names)-1] != name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// CreateNew writes the file p with data unless a file of that name exists
// (then it returns false): atomically, a whole file or none, and of two
// processes creating it at once one wins. A local file is a temp file
// hard-linked into place; an object a conditional create (If-None-Match:
// *).
func CreateNew(p string, data []byte) (bool, error) {
	if objstore.IsURL(p) {
		c, u, err := object(p)
		if err != nil {
			return false, err
		}
		err = c.PutNew(objectContext, u, data)
		if errors.Is(err, objstore.ErrExists) {
			return false, nil
		}
		return err == nil, err
	}
	tmp, err := CreateTemp(p)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	if err := os.Link(tmp.Name(), p); errors.Is(err, os.ErrExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, nil
}

// Remove removes the file (or object) p.
func Remove(p string) error {
	if !objstore.IsURL(p) {
		return os.Remove(p)
	}
	c, u, err := object(p)
	if err != nil {
		return err
	}
	return c.Remove(objectContext, u)
}

// MkdirAll makes directory dir and its parents; a prefix in object storage
// needs no making.
func MkdirAll(dir string) error {
	if objstore.IsURL(dir) {
		return nil
	}
	return os.MkdirAll(dir, 0o755)
}

// Glob returns the files matching pattern, sorted (for a pattern over
// object keys: path.Match on whole keys).
func Glob(pattern string) ([]string, error) {
	if !objstore.IsURL(pattern) {
		return filepath.Glob(pattern)
	}
	c, u, err := object(pattern)
	if err != nil {
		return nil, err
	}
	objs, err := c.List(objectContext, u.Bucket, u.Literal())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range objs {
		if ok, _ := path.Match(u.Key, o.URL.Key); ok {
			out = append(out, o.URL.String())
		}
	}
	return out, nil
}

// object returns the default client and the parsed URL p.
func object(p string) (*objstore.Client, objstore.URL, error) {
	u, err := objstore.Parse(p)
	if err != nil {
		return nil, u, err
	}
	c, err := objstore.Default(objectContext)
	return c, u, err
}

// RemoveAll removes directory dir and everything below it (for a prefix:
// every object below it).
func RemoveAll(dir string) error {
	if !objstore.IsURL(dir) {
		return os.RemoveAll(dir)
	}
	c, u, err := object(dir)
	if err != nil {
		return err
	}
	objs, err := c.List(objectContext, u.Bucket, u.Prefix())
	for _, o := range objs {
		if err = c.Remove(objectContext, o.URL); err != nil {
			break
		}
	}
	return err
}

// Size returns the size of the file (or object) p.
func Size(p string) (int64, error) {
	if !objstore.IsURL(p) {
		st, err := os.Stat(p)
		if err != nil {
			return 0, err
		}
		return st.Size(), nil
	}
	c, u, err := object(p)
	if err != nil {
		return 0, err
	}
	info, err := c.Stat(objectContext, u)
	return info.Size, err
}
