package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Cache keeps local copies of objects in Dir, at most Limit bytes of them:
// for readers that read only local files (DuckDB without its httpfs). A
// copy is named by its URL and ETag, so a copy of a replaced object is
// never used: Fetch asks the storage for the object's ETag each time.
type Cache struct {
	Dir   string
	Limit int64
	held  map[string]bool // the copies this Cache returned: never evicted by it
}

// OrNil returns the cache, nil when it has no directory (no cache).
func (ca *Cache) OrNil() *Cache {
	if ca.Dir == "" {
		return nil
	}
	return ca
}

// Fetch returns the local copy of object u as it is now, downloading it
// (into a temp file renamed into place) when the cache holds no copy of
// its ETag, then removing the least recently used copies until the cache
// holds at most Limit bytes (never one it has returned: a query reads them
// all, so Limit is exceeded rather than a copy in use removed).
func (ca *Cache) Fetch(ctx context.Context, c *Client, u URL) (string, error) {
	info, err := c.Stat(ctx, u)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(ca.Dir, 0o755); err != nil {
		return "", fmt.Errorf("cache: %w", err)
	}
	sum := sha256.Sum256([]byte(u.String()))
	etag := sha256.Sum256([]byte(info.ETag))
	name := filepath.Join(ca.Dir, hex.EncodeToString(sum[:8])+"-"+hex.EncodeToString(etag[:8])+path.Ext(u.Key))
	if ca.held == nil {
		ca.held = map[string]bool{}
	}
	ca.held[name] = true
	if st, err := os.Stat(name); err == nil && st.Size() == info.Size {
		now := time.Now()
		os.Chtimes(name, now, now) // the most recently used
	} else if err := ca.download(ctx, c, u, info, name); err != nil {
		return "", err
	}
	ca.evict(name, hex.EncodeToString(sum[:8]))
	return name, nil
}

// download writes object u (of info) to name, whole or not at all.
func (ca *Cache) download(ctx context.Context, c *Client, u URL, info Info, name string) error {
	o, err := c.Open(ctx, u, nil)
	if err != nil {
		return err
	}
	defer o.Close()
	if o.Info().ETag != info.ETag {
		return fmt.Errorf("%s: %w", u, ErrChanged)
	}
	tmp, err := os.CreateTemp(ca.Dir, ".fetch-*.tmp")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, o)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != info.Size {
		err = fmt.Errorf("%s: got %d of %d bytes", u, n, info.Size)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// evict removes the other versions of the object whose copies start with
// prefix, then the least recently used copies beyond Limit, keeping keep.
func (ca *Cache) evict(keep, prefix string) {
	ents, err := os.ReadDir(ca.Dir)
	if err != nil {
		return
	}
	type copyInfo struct {
		path string
		size int64
		used time.Time
	}
	var copies []copyInfo
	total := int64(0)
	for _, e := range ents {
		p := filepath.Join(ca.Dir, e.Name())
		st, err := e.Info()
		if err != nil || e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if p != keep && strings.HasPrefix(e.Name(), prefix+"-") {
			os.Remove(p) // a replaced version
			continue
		}
		copies = append(copies, copyInfo{p, st.Size(), st.ModTime()})
		total += st.Size()
	}
	sort.Slice(copies, func(i, j int) bool { return copies[i].used.Before(copies[j].used) })
	for _, cp := range copies {
		if total <= ca.Limit {
			return
		}
		if !ca.held[cp.path] && os.Remove(cp.path) == nil {
			total -= cp.size
		}
	}
}
