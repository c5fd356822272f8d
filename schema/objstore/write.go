package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
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

// PartSize is the size of an upload's parts (the last one smaller), grown
// for objects of over 10000 parts; PartsInFlight parts go at once.
const (
	PartSize      = 16 << 20
	PartsInFlight = 4
)

// Upload is an object uploaded but not yet in place: a multipart upload
// with every part sent. Nothing is visible under its URL until Complete;
// Abort (or a process that dies) leaves nothing.
type Upload struct {
	c     *Client
	u     URL
	id    *string
	parts []types.CompletedPart
	done  bool
}

// Upload sends the size bytes of r as the parts of a new multipart upload
// of object u; a part whose connection drops is sent again. On any
// failure the upload is aborted.
func (c *Client) Upload(ctx context.Context, u URL, r io.ReaderAt, size int64) (*Upload, error) {
	out, err := c.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &u.Bucket, Key: &u.Key})
	if err != nil {
		return nil, fail(u, "upload", err)
	}
	up := &Upload{c: c, u: u, id: out.UploadId}
	part := max(int64(PartSize), (size+9999)/10000)
	n := max(1, int((size+part-1)/part))
	up.parts = make([]types.CompletedPart, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(PartsInFlight)
	for i := range n {
		off := int64(i) * part
		length := min(part, size-off)
		g.Go(func() error {
			p, err := c.s3.UploadPart(gctx, &s3.UploadPartInput{Bucket: &u.Bucket, Key: &u.Key, UploadId: up.id,
				PartNumber: aws.Int32(int32(i + 1)), Body: io.NewSectionReader(r, off, length), ContentLength: aws.Int64(length)})
			if err == nil {
				up.parts[i] = types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: p.ETag}
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		up.Abort()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fail(u, "upload", err)
	}
	return up, nil
}

// Complete puts the uploaded object in place, whole.
func (up *Upload) Complete(ctx context.Context) error {
	if up.done {
		return fmt.Errorf("%s: upload already finished", up.u)
	}
	_, err := up.c.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &up.u.Bucket, Key: &up.u.Key,
		UploadId: up.id, MultipartUpload: &types.CompletedMultipartUpload{Parts: up.parts}})
	if err != nil {
		up.Abort()
		return fail(up.u, "complete upload", err)
	}
	up.done = true
	return nil
}

// Abort discards the upload, under a context of its own: it runs when the
// job's is cancelled (a signal). It does nothing after Complete.
func (up *Upload) Abort() {
	if up.done {
		return
	}
	up.done = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up.c.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &up.u.Bucket, Key: &up.u.Key, UploadId: up.id})
}
