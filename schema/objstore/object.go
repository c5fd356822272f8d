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

// Reads go in blocks of BlockSize bytes, each one ranged GET. A read
// that spans blocks starts the GETs of all of them before it waits for
// the first, and the blocks it covers whole, when not held, are read
// straight into the caller's buffer (one copy, nothing held). A stream
// read in order, one block after the block before it (a column chunk,
// whatever other chunks are read meanwhile), has the next ReadAhead
// blocks fetched while it reads. At most InFlight GETs run at once and at
// most CachedBlocks blocks are held, the least recently used dropped
// first and its buffer reused: an Object holds at most
// CachedBlocks×BlockSize bytes (32 MiB) besides the blocks in use,
// whatever the size of the object.
const (
	BlockSize    = 2 << 20
	ReadAhead    = 2
	InFlight     = 8
	CachedBlocks = 16
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
	free   [][]byte // buffers of dropped blocks, for the next ones
	tick   int64    // use counter, for least-recently-used eviction
	slots  chan struct{}
	pos    int64 // Read and Seek's offset
	closed bool
}

// block is one block, fetched or being fetched; o.mu guards used and
// refs, ready closes once data and err are set.
type block struct {
	ready chan struct{}
	data  []byte
	err   error
	used  int64
	refs  int // reads copying from data: it is not reused meanwhile
}

// Open opens object u for reading under ctx (ErrNotFound when there is
// none). count, when not nil, is told the bytes of each GET.
func (c *Client) Open(ctx context.Context, u URL, count func(int64)) (*Object, error) {
	info, err := c.Stat(ctx, u)
	if err != nil {
		return nil, err
	}
	return &Object{c: c, ctx: ctx, info: info, n: count, blocks: map[int64]*block{}, slots: make(chan struct{}, InFlight)}, nil
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
	end := min(off+int64(len(p)), o.info.Size)
	if end <= off {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	first, last := off/BlockSize, (end-1)/BlockSize
	// Every block of the range is started (or taken from those held)
	// before the first is waited for.
	parts := make([]part, 0, last-first+1)
	o.mu.Lock()
	for i := first; i <= last; i++ {
		lo, hi := max(off, i*BlockSize), min(end, (i+1)*BlockSize)
		pt := part{p: p[lo-off : hi-off], at: lo - i*BlockSize}
		if _, held := o.blocks[i]; !held && hi-lo == BlockSize {
			pt.direct = o.get(i, pt.p)
		} else {
			pt.b = o.start(i)
			pt.b.refs++
		}
		parts = append(parts, pt)
	}
	if _, ok := o.blocks[first-1]; ok || first == 0 {
		for k := last + 1; k <= last+ReadAhead && k*BlockSize < o.info.Size; k++ {
			o.start(k)
		}
	}
	o.mu.Unlock()
	n, err := 0, error(nil)
	for _, pt := range parts {
		if pt.direct != nil {
			<-pt.direct.ready // even after an error: p is not written once ReadAt returns
			if err == nil {
				err = pt.direct.err
			}
		} else if err == nil {
			select {
			case <-pt.b.ready:
				if err = pt.b.err; err == nil {
					copy(pt.p, pt.b.data[pt.at:])
				}
			case <-o.ctx.Done():
				err = o.ctx.Err()
			}
		}
		if err == nil {
			n += len(pt.p)
		}
		if pt.b != nil {
			o.mu.Lock()
			pt.b.refs--
			o.mu.Unlock()
		}
	}
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// part is the share of one block in a read: p, its bytes, at offset at
// in the block; b the block held, or direct the GET into p.
type part struct {
	p         []byte
	at        int64
	b, direct *block
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

// start returns block i, starting its GET if it is not held (or failed);
// o.mu is held.
func (o *Object) start(i int64) *block {
	o.tick++
	if b, ok := o.blocks[i]; ok && (!isDone(b) || b.err == nil) {
		b.used = o.tick
		return b
	}
	if !o.closed {
		o.evict()
	}
	var buf []byte
	if n := len(o.free); n > 0 {
		buf, o.free = o.free[n-1], o.free[:n-1]
	} else {
		buf = make([]byte, BlockSize)
	}
	b := o.get(i, buf[:min(BlockSize, o.info.Size-i*BlockSize)])
	b.used = o.tick
	if !o.closed {
		o.blocks[i] = b
	}
	return b
}

// get returns a block whose GET of block i into buf runs once a slot is
// free.
func (o *Object) get(i int64, buf []byte) *block {
	b := &block{ready: make(chan struct{})}
	go func() {
		defer close(b.ready)
		select {
		case o.slots <- struct{}{}:
		case <-o.ctx.Done():
			b.err = o.ctx.Err()
			return
		}
		defer func() { <-o.slots }()
		b.err = o.fetch(i, buf)
		b.data = buf
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

// evict drops the least recently used fetched blocks not in use while
// CachedBlocks or more are held, keeping their buffers for the next;
// o.mu is held.
func (o *Object) evict() {
	for len(o.blocks) >= CachedBlocks {
		old, oldest := int64(-1), int64(0)
		for k, b := range o.blocks {
			if b.refs == 0 && isDone(b) && (old < 0 || b.used < oldest) {
				old, oldest = k, b.used
			}
		}
		if old < 0 {
			return
		}
		if b := o.blocks[old]; b.err == nil && cap(b.data) == BlockSize {
			o.free = append(o.free, b.data[:BlockSize])
		}
		delete(o.blocks, old)
	}
}

// fetch GETs block i into buf (its length), trying again (Client.retry)
// when the connection drops mid-body.
func (o *Object) fetch(i int64, buf []byte) error {
	start := i * BlockSize
	end := start + int64(len(buf))
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
		return &schema.InputError{File: u.String(), Row: -1, Msg: "object replaced while it was read", Err: ErrChanged}
	}
	return fail(u, fmt.Sprintf("read bytes %d-%d", start, end-1), err)
}
