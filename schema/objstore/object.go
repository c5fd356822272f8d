package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rftpipe/rftpipe/schema"
)

// Reads go in blocks of BlockSize bytes, each one ranged GET. A reader
// that reads block b right after block b-1 (a column chunk read in order)
// has the next ReadAhead blocks fetched meanwhile; at most InFlight GETs
// run at once and at most CachedBlocks blocks are held, the least recently
// used dropped first: an Object holds at most CachedBlocks×BlockSize bytes
// (64 MiB) whatever the size of the object.
const (
	BlockSize    = 2 << 20
	ReadAhead    = 2
	InFlight     = 8
	CachedBlocks = 32
)

// ErrChanged is the error of a read from an object replaced since it was
// opened.
var ErrChanged = errors.New("object changed while it was read")

// Info is what a listing or Stat tells of an object.
type Info struct {
	URL  URL
	Size int64
	ETag string
}

// Stat returns the size and ETag of object u (ErrNotFound when there is
// none).
func (c *Client) Stat(ctx context.Context, u URL) (Info, error) {
	out, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &u.Bucket, Key: &u.Key})
	if _, status := errorCode(err); status == http.StatusForbidden || status == http.StatusNotFound {
		// A HEAD answer has no body to say why (a missing bucket or key,
		// credentials refused or a key denied): a GET's says.
		if got, gerr := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: &u.Bucket, Key: &u.Key}); gerr == nil {
			got.Body.Close()
		} else {
			err = gerr
		}
	}
	if err != nil {
		return Info{}, fail(u, "stat", err)
	}
	return Info{URL: u, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag)}, nil
}

// List returns every object whose key starts with prefix (in bucket),
// sorted by key.
func (c *Client) List(ctx context.Context, bucket, prefix string) ([]Info, error) {
	var out []Info
	p := s3.NewListObjectsV2Paginator(c.s3, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fail(URL{Bucket: bucket, Key: prefix}, "list", err)
		}
		for _, o := range page.Contents {
			out = append(out, Info{URL: URL{Bucket: bucket, Key: aws.ToString(o.Key)}, Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag)})
		}
	}
	return out, nil
}

// Object is an open object read with ranged GETs, every one of them of
// the version opened (If-Match its ETag): a replaced object fails with
// ErrChanged rather than mixing two versions. It is an io.ReaderAt, safe
// for concurrent use, and an io.ReadSeeker.
type Object struct {
	c    *Client
	ctx  context.Context
	info Info
	n    func(int64) // counts the bytes fetched, when set

	mu     sync.Mutex
	blocks map[int64]*block
	tick   int64 // use counter, for least-recently-used eviction
	last   int64 // the last block read
	slots  chan struct{}
	pos    int64 // Read and Seek's offset
	closed bool
}

type block struct {
	ready chan struct{}
	data  []byte
	err   error
	used  int64
}

// Open opens object u for reading under ctx (ErrNotFound when there is
// none). count, when not nil, is told the bytes of each GET.
func (c *Client) Open(ctx context.Context, u URL, count func(int64)) (*Object, error) {
	info, err := c.Stat(ctx, u)
	if err != nil {
		return nil, err
	}
	return &Object{c: c, ctx: ctx, info: info, n: count, blocks: map[int64]*block{}, last: -2, slots: make(chan struct{}, InFlight)}, nil
}

// Info returns the object's URL, size and ETag as opened.
func (o *Object) Info() Info { return o.info }

// Name returns the object's URL.
func (o *Object) Name() string { return o.info.URL.String() }

// Size returns the object's size.
func (o *Object) Size() int64 { return o.info.Size }

// ReadAt reads len(p) bytes at off, as io.ReaderAt.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset", o.Name())
	}
	n := 0
	for n < len(p) && off+int64(n) < o.info.Size {
		at := off + int64(n)
		b, err := o.block(at / BlockSize)
		if err != nil {
			return n, err
		}
		n += copy(p[n:], b[at%BlockSize:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Read reads at the offset Seek set, as io.Reader.
func (o *Object) Read(p []byte) (int, error) {
	if o.pos >= o.info.Size {
		return 0, io.EOF
	}
	n, err := o.ReadAt(p[:min(int64(len(p)), o.info.Size-o.pos)], o.pos)
	o.pos += int64(n)
	return n, err
}

// Seek sets the offset of Read, as io.Seeker.
func (o *Object) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += o.pos
	case io.SeekEnd:
		offset += o.info.Size
	}
	if offset < 0 {
		return 0, fmt.Errorf("%s: seek before the start", o.Name())
	}
	o.pos = offset
	return offset, nil
}

// Close drops the blocks held; GETs in flight finish on their own.
func (o *Object) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.blocks = map[int64]*block{}
	return nil
}

// block returns the bytes of block i, fetching it (and, read in order,
// the blocks after it) if it is not held.
func (o *Object) block(i int64) ([]byte, error) {
	o.mu.Lock()
	b := o.start(i)
	if i == o.last+1 {
		for k := i + 1; k <= i+ReadAhead && k*BlockSize < o.info.Size; k++ {
			o.start(k)
		}
	}
	o.last = i
	o.mu.Unlock()
	select {
	case <-b.ready:
	case <-o.ctx.Done():
		return nil, o.ctx.Err()
	}
	return b.data, b.err
}

// start returns block i, starting its GET if it is not held (or failed);
// o.mu is held.
func (o *Object) start(i int64) *block {
	o.tick++
	if b, ok := o.blocks[i]; ok && (!isDone(b) || b.err == nil) {
		b.used = o.tick
		return b
	}
	b := &block{ready: make(chan struct{}), used: o.tick}
	if !o.closed {
		o.blocks[i] = b
		o.evict()
	}
	go func() {
		defer close(b.ready)
		select {
		case o.slots <- struct{}{}:
		case <-o.ctx.Done():
			b.err = o.ctx.Err()
			return
		}
		defer func() { <-o.slots }()
		b.data, b.err = o.fetch(i)
	}()
	return b
}

func isDone(b *block) bool {
	select {
	case <-b.ready:
		return true
	default:
		return false
	}
}

// evict drops the least recently used fetched blocks beyond CachedBlocks;
// o.mu is held.
func (o *Object) evict() {
	for len(o.blocks) > CachedBlocks {
		old, oldest := int64(-1), int64(0)
		for k, b := range o.blocks {
			if isDone(b) && (old < 0 || b.used < oldest) {
				old, oldest = k, b.used
			}
		}
		if old < 0 {
			return
		}
		delete(o.blocks, old)
	}
}

// fetch GETs block i, trying again (Client.retry) when the connection
// drops mid-body.
func (o *Object) fetch(i int64) ([]byte, error) {
	start := i * BlockSize
	end := min(start+BlockSize, o.info.Size)
	buf := make([]byte, end-start)
	u := o.info.URL
	in := &s3.GetObjectInput{Bucket: &u.Bucket, Key: &u.Key, Range: aws.String(fmt.Sprintf("bytes=%d-%d", start, end-1))}
	if o.info.ETag != "" {
		in.IfMatch = aws.String(o.info.ETag)
	}
	err := o.c.retry(o.ctx, func() error {
		out, err := o.c.s3.GetObject(o.ctx, in)
		if err != nil {
			if _, status := errorCode(err); status == 412 {
				return ErrChanged
			}
			return err
		}
		defer out.Body.Close()
		if etag := aws.ToString(out.ETag); o.info.ETag != "" && etag != "" && strings.Trim(etag, `"`) != strings.Trim(o.info.ETag, `"`) {
			return ErrChanged
		}
		n, err := io.ReadFull(out.Body, buf)
		if o.n != nil {
			o.n(int64(n))
		}
		if err != nil {
			return &bodyError{err}
		}
		return nil
	})
	if errors.Is(err, ErrChanged) {
		return nil, &schema.InputError{File: u.String(), Row: -1, Msg: "object replaced while it was read", Err: ErrChanged}
	}
	return buf, fail(u, fmt.Sprintf("read bytes %d-%d", start, end-1), err)
}
