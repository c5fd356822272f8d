// Package objstore reads and writes objects of S3-compatible storage (AWS
// S3, MinIO, Ceph RGW, R2, GCS's S3 API) named s3://BUCKET/KEY: the one
// place rftpipe talks to object storage. A store, table or output named so
// is read with ranged GETs (Object, an io.ReaderAt), and written whole or
// not at all (Upload: a multipart upload completed only by Complete;
// PutNew: a conditional create).
//
// Credentials, region and endpoint come from the standard environment and
// files (see Config); every error names the object's URL and never a
// credential or a signed URL.
package objstore

import (
	"path"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
)

// Scheme is the prefix of an object URL.
const Scheme = "s3://"

// IsURL reports whether a path names object storage (s3://…).
func IsURL(p string) bool { return len(p) >= len(Scheme) && strings.EqualFold(p[:len(Scheme)], Scheme) }

// URL is a parsed s3://BUCKET/KEY. Key may be empty (the whole bucket),
// end with "/" (a prefix) or hold glob metacharacters (a pattern).
type URL struct {
	Bucket, Key string
}

// Parse parses s3://BUCKET/KEY. A bucket name follows S3's rules (3 to 63
// lower-case letters, digits, dots and hyphens); a key has no empty
// segment ("a//b"), no "." or ".." segment.
func Parse(s string) (URL, error) {
	if !IsURL(s) {
		return URL{}, schema.Errorf(s, -1, "", "not an object URL (s3://BUCKET/KEY)")
	}
	rest := s[len(Scheme):]
	bucket, key, _ := strings.Cut(rest, "/")
	if !validBucket(bucket) {
		return URL{}, schema.Errorf(s, -1, "", "bad bucket name %q: 3 to 63 lower-case letters, digits, dots and hyphens", bucket)
	}
	for i, seg := range strings.Split(strings.TrimSuffix(key, "/"), "/") {
		if key == "" {
			break
		}
		if seg == "" || seg == "." || seg == ".." {
			return URL{}, schema.Errorf(s, -1, "", "bad key %q: segment %d is %q", key, i+1, seg)
		}
	}
	return URL{Bucket: bucket, Key: key}, nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// String returns the URL as s3://BUCKET/KEY.
func (u URL) String() string { return Scheme + u.Bucket + "/" + u.Key }

// Join returns the URL of name below u taken as a directory (prefix).
func (u URL) Join(name ...string) URL {
	k := strings.TrimSuffix(u.Key, "/")
	for _, n := range name {
		n = strings.Trim(n, "/")
		if n == "" {
			continue
		}
		if k == "" {
			k = n
		} else {
			k += "/" + n
		}
	}
	return URL{Bucket: u.Bucket, Key: k}
}

// Dir returns the prefix u lies in (as path.Dir of the key; "" for a key
// at the top of the bucket).
func (u URL) Dir() URL {
	d := path.Dir(strings.TrimSuffix(u.Key, "/"))
	if d == "." {
		d = ""
	}
	return URL{Bucket: u.Bucket, Key: d}
}

// Base returns the last segment of the key.
func (u URL) Base() string { return path.Base(strings.TrimSuffix(u.Key, "/")) }

// Prefix returns the key taken as a directory: it ends with "/" (or is
// empty: the whole bucket).
func (u URL) Prefix() string {
	if u.Key == "" || strings.HasSuffix(u.Key, "/") {
		return u.Key
	}
	return u.Key + "/"
}

// Within reports whether u is dir or lies below it (dir taken as a prefix).
func (u URL) Within(dir URL) bool {
	if u.Bucket != dir.Bucket {
		return false
	}
	k := strings.TrimSuffix(u.Key, "/")
	return k == strings.TrimSuffix(dir.Key, "/") || strings.HasPrefix(k+"/", dir.Prefix())
}

// Literal returns the part of a pattern's key before its first glob
// metacharacter: the prefix a listing for it starts from.
func (u URL) Literal() string {
	if i := strings.IndexAny(u.Key, "*?["); i >= 0 {
		return u.Key[:i]
	}
	return u.Key
}

// Match reports whether key matches the pattern u's key, segment by
// segment as path.Match does (a "*" does not cross "/").
func (u URL) Match(key string) bool {
	ok, err := path.Match(u.Key, key)
	return err == nil && ok
}
