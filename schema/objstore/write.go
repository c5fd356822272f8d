package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"
)

// Get returns the whole of object u (a small one: a plan, a metrics file).
func (c *Client) Get(ctx context.Context, u URL) ([]byte, error) {
	var data []byte
	err := c.retry(ctx, func() error {
		out, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: &u.Bucket, Key: &u.Key})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		if data, err = io.ReadAll(out.Body); err != nil {
			return &bodyError{err}
		}
		return nil
	})
	return data, fail(u, "get", err)
}

// PutNew writes the small object u with data only if there is none yet
// (a conditional create, If-None-Match: *): when two writers race, one
// wins and the other gets ErrExists.
func (c *Client) PutNew(ctx context.Context, u URL, data []byte) error {
	_, err := c.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: &u.Bucket, Key: &u.Key, Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), IfNoneMatch: aws.String("*")})
	return fail(u, "create", err)
}

// Remove removes object u; one that is not there is no error.
func (c *Client) Remove(ctx context.Context, u URL) error {
	_, err := c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &u.Bucket, Key: &u.Key})
	return fail(u, "remove", err)
}

// Uploads go in parts of PartSize bytes (the last one smaller), sent while
// the object is written, PartsInFlight at once: a Writer holds at most
// PartsInFlight+1 parts (40 MiB), whatever the size of the object. Part
// sizes double every PartsPerSize parts, so that an object of up to 80
// TiB fits in S3's 10000 parts.
const (
	PartSize      = 8 << 20
	PartsInFlight = 4
	PartsPerSize  = 1000
)

// Writer is an object written as it is made: a multipart upload whose
// parts go up while the writing goes on. Nothing is visible under its URL
// until Complete; Abort (or a process that dies, or a failure) leaves
// nothing but a dangling upload, which Abort removes. It is an
// io.Writer, and tells its offset (Seek(0, io.SeekCurrent)); one goroutine
// writes it.
type Writer struct {
	c      *Client
	u      URL
	job    context.Context // the caller's
	ctx    context.Context // the parts' requests: cancelled by a failure or Abort
	cancel context.CancelFunc
	g      *errgroup.Group

	id   *string // the multipart upload, begun with the first part
	buf  []byte  // the part being filled
	free [][]byte
	n    int64 // bytes written
	sent int32 // parts sent

	mu    sync.Mutex
	parts []types.CompletedPart
	err   error // the first failed part's
	done  bool
}

// Create begins writing object u under ctx (a cancelled ctx fails the
// parts in flight: the caller then Aborts).
func (c *Client) Create(ctx context.Context, u URL) *Writer {
	pctx, cancel := context.WithCancel(ctx)
	w := &Writer{c: c, u: u, job: ctx, ctx: pctx, cancel: cancel, g: new(errgroup.Group)}
	w.g.SetLimit(PartsInFlight)
	return w
}

// partSize is the size of part k (from 0).
func partSize(k int32) int { return PartSize << min(k/PartsPerSize, 9) }

// Write appends p, sending each part as it fills.
func (w *Writer) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if err := w.failure(); err != nil {
			return n, err
		}
		if w.buf == nil {
			w.buf = w.buffer(partSize(w.sent))
		}
		k := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+k]
		p, n, w.n = p[k:], n+k, w.n+int64(k)
		if len(w.buf) == cap(w.buf) {
			if err := w.send(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// Seek tells the offset (Seek(0, io.SeekCurrent)); a writer of parts sent
// cannot move.
func (w *Writer) Seek(offset int64, whence int) (int64, error) {
	if offset != 0 || whence != io.SeekCurrent {
		return 0, fmt.Errorf("%s: an object is written in order", w.u)
	}
	return w.n, nil
}

// buffer returns an empty buffer of n bytes, reusing a sent part's (those
// of a smaller part size are dropped).
func (w *Writer) buffer(n int) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.free) > 0 {
		b := w.free[len(w.free)-1]
		w.free = w.free[:len(w.free)-1]
		if cap(b) == n {
			return b[:0]
		}
	}
	return make([]byte, 0, n)
}

func (w *Writer) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// send sends the part filled (beginning the upload with the first), on
// a goroutine of its own once fewer than PartsInFlight are in flight; a
// part whose connection drops is sent again (the SDK's retries).
func (w *Writer) send() error {
	if w.id == nil {
		// Not cut short by a cancel: an upload the server began and the
		// writer never heard of could not be aborted.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), time.Minute)
		out, err := w.c.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &w.u.Bucket, Key: &w.u.Key})
		cancel()
		if err != nil {
			return w.fail(err)
		}
		w.id = out.UploadId
		if err := w.ctx.Err(); err != nil {
			return w.fail(err)
		}
	}
	body, num := w.buf, w.sent+1
	w.buf, w.sent = nil, num
	w.g.Go(func() error {
		p, err := w.c.s3.UploadPart(w.ctx, &s3.UploadPartInput{Bucket: &w.u.Bucket, Key: &w.u.Key, UploadId: w.id,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))})
		if err != nil {
			return w.fail(err)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.parts = append(w.parts, types.CompletedPart{PartNumber: aws.Int32(num), ETag: p.ETag})
		w.free = append(w.free, body)
		return nil
	})
	return w.failure()
}

// fail records err as the writer's and returns it.
func (w *Writer) fail(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = fail(w.u, "upload", err)
		w.cancel()
	}
	return w.err
}

// Finish sends the last part and waits for every part to be uploaded:
// everything but Complete. An empty object is sent whole by Complete.
func (w *Writer) Finish() error {
	if len(w.buf) > 0 {
		w.send()
	}
	w.g.Wait()
	if err := w.failure(); err != nil {
		if w.job.Err() != nil {
			return w.job.Err() // cancelled (a signal), not failed
		}
		return err
	}
	return nil
}

// Complete puts the object in place, whole: Finish, then the upload's
// completion (or, for an empty object, a PUT of nothing). On failure the
// upload is aborted.
func (w *Writer) Complete() error {
	if w.done {
		return fmt.Errorf("%s: upload already finished", w.u)
	}
	err := w.Finish()
	if err == nil && w.id == nil {
		_, err = w.c.s3.PutObject(w.ctx, &s3.PutObjectInput{Bucket: &w.u.Bucket, Key: &w.u.Key, Body: bytes.NewReader(nil), ContentLength: aws.Int64(0)})
		err = fail(w.u, "upload", err)
	} else if err == nil {
		slices.SortFunc(w.parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
		_, err = w.c.s3.CompleteMultipartUpload(w.ctx, &s3.CompleteMultipartUploadInput{Bucket: &w.u.Bucket, Key: &w.u.Key,
			UploadId: w.id, MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts}})
		err = fail(w.u, "complete upload", err)
	}
	if err != nil {
		w.Abort()
		return err
	}
	w.done = true
	w.cancel()
	return nil
}

// Abort discards the upload: the parts in flight are stopped, those sent
// removed, under a context of its own (it runs when the job's is
// cancelled, by a signal). It does nothing after Complete.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.cancel()
	w.g.Wait()
	if w.id == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.c.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &w.u.Bucket, Key: &w.u.Key, UploadId: w.id})
}
