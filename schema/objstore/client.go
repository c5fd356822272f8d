package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/rftpipe/rftpipe/schema"
)

// Config is where a Client finds the storage and its account. FromEnv
// reads it from the standard environment and files, as the AWS SDK does:
//
//   - AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL (or endpoint_url of the
//     profile): the endpoint (http://minio:9000,
//     https://ACCOUNT.r2.cloudflarestorage.com); AWS S3 when none is set;
//   - AWS_REGION, else AWS_DEFAULT_REGION, else the profile's region;
//     us-east-1 when none is set (MinIO and Ceph accept it);
//   - credentials, the first found of: AWS_ACCESS_KEY_ID,
//     AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN; the profile AWS_PROFILE
//     of ~/.aws/credentials and ~/.aws/config (AWS_SHARED_CREDENTIALS_FILE,
//     AWS_CONFIG_FILE); a web identity (a Kubernetes service account); the
//     container's or instance's role;
//   - path-style addressing (ENDPOINT/BUCKET/KEY, which MinIO and Ceph RGW
//     usually need) when AWS_S3_FORCE_PATH_STYLE=true, or when the
//     endpoint's host is an IP address or localhost (no bucket name can
//     be put before those); virtual-hosted (BUCKET.ENDPOINT/KEY) otherwise.
type Config struct {
	AWS       aws.Config
	PathStyle bool
	// Retries is how many times a failed request is tried again (a dropped
	// connection, 503 SlowDown, a 5xx), with exponential backoff (full
	// jitter) from Backoff, at most 32 times it.
	Retries int
	Backoff time.Duration
}

// DefaultRetries and DefaultBackoff are a Config's retry settings from
// the environment.
const (
	DefaultRetries = 8
	DefaultBackoff = 100 * time.Millisecond
)

// FromEnv returns the Config of the standard environment (see Config).
func FromEnv(ctx context.Context) (Config, error) {
	c := Config{Retries: DefaultRetries, Backoff: DefaultBackoff}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return c, schema.BadInputf("object storage configuration: %v", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	c.AWS = cfg
	if v := os.Getenv("AWS_S3_FORCE_PATH_STYLE"); v != "" {
		if c.PathStyle, err = strconv.ParseBool(v); err != nil {
			return c, schema.BadInputf("AWS_S3_FORCE_PATH_STYLE=%q: want true or false", v)
		}
	}
	for _, k := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if v := os.Getenv(k); v != "" {
			ep, err := url.Parse(v)
			if err != nil || ep.Host == "" || ep.Scheme != "http" && ep.Scheme != "https" {
				return c, schema.BadInputf("%s=%q: want http(s)://HOST[:PORT]", k, v)
			}
			if h := ep.Hostname(); h == "localhost" || net.ParseIP(h) != nil {
				c.PathStyle = true
			}
			break
		}
	}
	return c, nil
}

// Client talks to one object storage endpoint.
type Client struct {
	s3      *s3.Client
	retries int
	backoff time.Duration
}

// New returns a client for c.
func New(c Config) *Client {
	backoff := func(attempt int) time.Duration {
		d := c.Backoff << min(attempt, 5)
		return time.Duration(rand.Int64N(int64(d) + 1))
	}
	cl := s3.NewFromConfig(c.AWS, func(o *s3.Options) {
		o.UsePathStyle = c.PathStyle
		o.Retryer = retry.NewStandard(func(r *retry.StandardOptions) {
			r.MaxAttempts = c.Retries + 1
			r.MaxBackoff = 32 * c.Backoff
			r.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) { return backoff(attempt), nil })
			r.RateLimiter = ratelimit.None
		})
		// No checksums beyond what a request requires: not every
		// S3-compatible server takes the SDK's default trailing ones
		// (aws-chunked bodies).
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Client{s3: cl, retries: c.Retries, backoff: c.Backoff}
}

var shared struct {
	sync.Mutex
	key    string
	client *Client
}

// Default returns the client of the standard environment (FromEnv), made
// once per setting of it.
func Default(ctx context.Context) (*Client, error) {
	var key strings.Builder
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "AWS_") {
			key.WriteString(e + "\x00")
		}
	}
	shared.Lock()
	defer shared.Unlock()
	if shared.client == nil || shared.key != key.String() {
		c, err := FromEnv(ctx)
		if err != nil {
			return nil, err
		}
		shared.client, shared.key = New(c), key.String()
	}
	return shared.client, nil
}

// ErrExists is the error of PutNew when the object already exists.
var ErrExists = errors.New("object already exists")

// ErrNotFound marks an error for an object (or bucket) that does not
// exist; such an error is fs.ErrNotExist too.
var ErrNotFound = errors.New("no such object")

// fail turns an error of a request for u into one line naming u and what
// failed, never a credential or signed URL: refusals (bad credentials, a
// missing bucket, a denied key, a missing object) are bad input
// (schema.ErrBadInput, exit 2), anything else (the network, the server)
// a fault.
func fail(u URL, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	code, status := errorCode(err)
	switch {
	case code == "NoSuchBucket":
		return notFound{schema.Errorf(u.String(), -1, "", "no such bucket %s", u.Bucket)}
	case code == "NoSuchKey" || code == "NoSuchUpload" || code == "NotFound" || status == http.StatusNotFound:
		return notFound{schema.Errorf(u.String(), -1, "", "no such object")}
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "ExpiredToken" ||
		code == "InvalidToken" || code == "TokenRefreshRequired":
		return schema.Errorf(u.String(), -1, "", "%s: the storage refused the credentials (%s); check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN", op, code)
	case code == "AccessDenied" || status == http.StatusForbidden:
		return schema.Errorf(u.String(), -1, "", "%s: access denied", op)
	case code == "PreconditionFailed" || status == http.StatusPreconditionFailed:
		return fmt.Errorf("%s: %s: %w", u, op, ErrExists)
	case code == "InvalidBucketName":
		return schema.Errorf(u.String(), -1, "", "bad bucket name %q", u.Bucket)
	case status != 0:
		return fmt.Errorf("%s: %s: %s (HTTP %d)", u, op, firstNonEmpty(code, http.StatusText(status)), status)
	}
	if msg := err.Error(); strings.Contains(msg, "get identity:") || strings.Contains(msg, "failed to retrieve credentials") {
		return schema.Errorf(u.String(), -1, "", "%s: no usable credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE", op)
	}
	return fmt.Errorf("%s: %s: connection failed: %s", u, op, transportError(err))
}

// notFound is a refusal that is ErrNotFound too.
type notFound struct{ error }

func (e notFound) Unwrap() error        { return e.error }
func (e notFound) Is(target error) bool { return target == ErrNotFound || target == fs.ErrNotExist }

// errorCode returns the S3 error code and HTTP status of err (zero when
// the request got no answer).
func errorCode(err error) (code string, status int) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

// transportError is err without the request URL a *url.Error carries (a
// signed URL holds a signature).
func transportError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// retry calls f until it succeeds, fails otherwise than by a body cut
// short (a bodyError: the connection dropped after the response began,
// which the SDK, having returned the response, does not retry itself) or
// the retries are spent, sleeping with exponential backoff between tries.
func (c *Client) retry(ctx context.Context, f func() error) error {
	wait := c.backoff
	for try := 0; ; try++ {
		err := f()
		var be *bodyError
		if err == nil || try >= c.retries || !errors.As(err, &be) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 32*c.backoff)
	}
}

// bodyError is a response body that ended before its length.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "response cut short: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }
