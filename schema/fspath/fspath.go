// Package fspath compares file paths as the file system resolves them:
// the one comparison every check of an output against an input, or of two
// outputs, uses, so that no spelling of a path (relative, with "..",
// through a symbolic link of any component, a hard link) escapes it.
// Objects of object storage (s3://BUCKET/KEY, package objstore) are
// compared by bucket and key, a prefix taken as a directory; an object is
// never a local file.
package fspath

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/rftpipe/rftpipe/schema/objstore"
)

// objects parses a and b when either is an object URL (obj): ok when both
// are, and parse.
func objects(a, b string) (ua, ub objstore.URL, obj, ok bool) {
	if !objstore.IsURL(a) && !objstore.IsURL(b) {
		return ua, ub, false, false
	}
	ua, errA := objstore.Parse(a)
	ub, errB := objstore.Parse(b)
	return ua, ub, true, errA == nil && errB == nil
}

// Join joins elements to the path dir, as filepath.Join does, or below
// the key of an object URL (s3://BUCKET/KEY/ELEM…).
func Join(dir string, elem ...string) string {
	if u, err := objstore.Parse(dir); err == nil {
		return u.Join(elem...).String()
	}
	return filepath.Join(append([]string{dir}, elem...)...)
}

// Dir returns the directory of path, as filepath.Dir does, or the prefix
// an object URL lies in.
func Dir(path string) string {
	if u, err := objstore.Parse(path); err == nil {
		return u.Dir().String()
	}
	return filepath.Dir(path)
}

// Resolve returns path absolute, with the symbolic links of its longest
// existing prefix resolved (filepath.EvalSymlinks of the nearest existing
// parent, the rest joined as spelled).
func Resolve(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	dir, base := filepath.Split(abs)
	if dir = filepath.Clean(dir); dir == abs {
		return abs
	}
	return filepath.Join(Resolve(dir), base)
}

// Same reports whether a and b name one file: both existing, the same file
// as the file system tells it (device and inode: hard links, and names
// that differ only in case on a file system that ignores case, are one);
// else the same resolved path, compared byte for byte.
func Same(a, b string) bool {
	if ua, ub, obj, ok := objects(a, b); obj {
		return ok && ua.Bucket == ub.Bucket && strings.TrimSuffix(ua.Key, "/") == strings.TrimSuffix(ub.Key, "/")
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	return Resolve(a) == Resolve(b)
}

// Within reports whether path is dir or lies below it, both resolved
// (Resolve).
func Within(dir, path string) bool {
	if ud, up, obj, ok := objects(dir, path); obj {
		return ok && up.Within(ud)
	}
	rel, err := filepath.Rel(Resolve(dir), Resolve(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Matches reports whether a read of the glob pattern would take the file
// path for one of its files: path's directory is, resolved, a directory
// matching the pattern's directory part, and its name matches the
// pattern's last element. path need not exist.
func Matches(pattern, path string) bool {
	if upat, up, obj, ok := objects(pattern, path); obj {
		return ok && upat.Bucket == up.Bucket && upat.Match(up.Key)
	}
	if ok, _ := filepath.Match(filepath.Base(pattern), filepath.Base(path)); !ok {
		return false
	}
	dirs, err := filepath.Glob(filepath.Dir(pattern))
	if err != nil {
		return false
	}
	for _, d := range dirs {
		if Same(d, filepath.Dir(path)) {
			return true
		}
	}
	return false
}
