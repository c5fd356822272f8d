package gpu

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/rftpipe/rftpipe/gpu/internal/lower"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/parallel"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// DefaultChunkTokens is the default number of tokens resident on the device
// at once (per buffer set; two sets alternate). 1<<25 tokens of six float32
// inputs and the gradient take under 1 GiB.
const DefaultChunkTokens = 1 << 25

// Options tune device evaluations.
type Options struct {
	// Float64 stores inputs and gradient as float64 on the device. The
	// default is float32 storage; the arithmetic and all sums are float64
	// either way.
	Float64 bool
	// ChunkTokens bounds the tokens resident on the device per buffer set;
	// a larger batch streams through in chunks of whole rows (0:
	// DefaultChunkTokens).
	ChunkTokens int
	// Timing records the device time of the kernels (CUDA events around
	// the launches of each chunk, transfers excluded); see TakeTiming.
	Timing bool
}

// Evaluator evaluates kernel terms on the device: a tokens.Evaluator, so
// loss.EvalOn, kl and entropy LossOn run the same plans as on the CPU. It
// keeps its buffers (device and pinned host memory) between evaluations and
// is not safe for concurrent use; Close releases them.
type Evaluator struct {
	d        *Device
	opt      Options
	slots    [2]*slot
	next     int  // the slot the next chunk goes to
	closed   bool // by Close
	kernelMs float64
	bytes    int64
}

// NewEvaluator returns an evaluator on d.
func (d *Device) NewEvaluator(opt Options) *Evaluator {
	if opt.ChunkTokens <= 0 {
		opt.ChunkTokens = DefaultChunkTokens
	}
	return &Evaluator{d: d, opt: opt}
}

// String names the device and the storage, e.g. "NVIDIA H200 (sm_90, 132
// SMs), float32 storage".
func (e *Evaluator) String() string {
	storage := "float32"
	if e.opt.Float64 {
		storage = "float64"
	}
	return fmt.Sprintf("%s, %s storage", e.d, storage)
}

// TakeTiming returns, for the evaluations since the last call
// (Options.Timing), the device time of their kernels and the fewest bytes
// those kernels must move through device memory (each input they read once,
// each gradient they write once), and resets both.
func (e *Evaluator) TakeTiming() (kernelMs float64, bytes int64) {
	kernelMs, bytes = e.kernelMs, e.bytes
	e.kernelMs, e.bytes = 0, 0
	return kernelMs, bytes
}

// The per-token inputs the kernels read, in the order of their arguments.
var columnNames = [...]string{tokens.LogProb, tokens.OldLogProb, tokens.RefLogProb, tokens.Advantages, tokens.ActionMask, tokens.Entropy}

const (
	colLP = iota
	colOld
	colRef
	colAdv
	colMask
	colEnt
	numCols
)

// columns returns which inputs a kernel reads.
func columns(k lower.Kernel) [numCols]bool {
	var c [numCols]bool
	c[colMask] = true
	switch k.Kind {
	case lower.KindOPMD:
		c[colLP], c[colAdv] = true, true
	case lower.KindSFT:
		c[colLP] = true
	case lower.KindDPOSums:
		c[colLP], c[colRef] = true, true
	case lower.KindRowFactor:
	case lower.KindKL:
		c[colLP], c[colRef], c[colOld] = true, true, k.Flag[2] != 0
	case lower.KindEntropy:
		c[colEnt] = true
	default: // the ratio losses
		c[colLP], c[colOld], c[colAdv] = true, true, true
	}
	return c
}

// trafficPerToken is the number of values per token a kernel must move:
// the inputs it reads and the gradient it writes.
func trafficPerToken(k lower.Kernel) int {
	n := 0
	for _, c := range columns(k) {
		if c {
			n++
		}
	}
	if writesGrad(k) {
		n++
	}
	return n
}

// termTokens is the number of tokens in the chunk's rows (chunk-relative).
func (r *run) termTokens(c *chunk, rows []int32) int {
	n := 0
	for _, row := range rows {
		lo, hi := r.b.Rows.Span(c.r0 + int(row))
		n += hi - lo
	}
	return n
}

// writesGrad mirrors rft_writes_grad.
func writesGrad(k lower.Kernel) bool { return k.Kind != lower.KindDPOSums }

// blockSize picks the threads per row block from the mean row length.
func blockSize(tokens, rows int) int {
	switch mean := tokens / max(rows, 1); {
	case mean <= 64:
		return 32
	case mean <= 256:
		return 64
	case mean <= 1024:
		return 128
	}
	return 256
}

// chunk is a range of whole rows evaluated together.
type chunk struct {
	r0, r1   int // rows
	t0, t1   int // tokens
	termRows [][]int32
	zero     []int32
}

// slot is one of two alternating sets of buffers, each with its stream:
// while the device works on one chunk the host prepares the next.
type slot struct {
	stream      uintptr
	start, stop uintptr // events
	dev         map[string]devBuf
	host        map[string]hostBuf
	pending     *chunk // queued, not yet drained
	owner       *run   // the evaluation pending belongs to
}

type devBuf struct {
	p devPtr
	n int
}

type hostBuf struct {
	p unsafe.Pointer
	n int
}

// Eval implements tokens.Evaluator on the device: Start, then Wait.
func (e *Evaluator) Eval(b *tokens.Batch, grad []float64, terms ...tokens.Term) ([]tokens.TermResult, error) {
	p, err := e.Start(b, grad, terms...)
	if err != nil {
		return nil, err
	}
	return p.Wait()
}

// pending is an evaluation Start has queued on the device and Wait
// collects.
type pending struct {
	r    *run
	res  []tokens.TermResult
	done bool
}

// Start implements tokens.Starter: it queues an evaluation of terms over b
// on the device — each chunk's upload, kernels and download on the stream
// of one of two alternating buffer sets — and returns once the last chunk
// is queued. grad and the
// results are not ready until Wait; b and grad must stay untouched until
// then. A chunk's results are copied out when its buffer set is next
// needed (by this evaluation or the next one started) or at Wait, so after
// Start(b2), Wait for the previous evaluation overlaps the copy of its
// gradient with b2's transfers and kernels. The device and pinned host
// memory are the two buffer sets whatever the number of evaluations in
// flight; the results are those of Eval, bit for bit.
func (e *Evaluator) Start(b *tokens.Batch, grad []float64, terms ...tokens.Term) (tokens.Pending, error) {
	if len(grad) != b.Rows.Tokens() {
		return nil, schema.BadInputf("gradient buffer has %d tokens, the batch has %d", len(grad), b.Rows.Tokens())
	}
	p, err := lower.Lower(b, terms)
	if err != nil {
		return nil, err
	}
	var r *run
	err = e.d.locked(func() error {
		if e.closed {
			return errClosed
		}
		var err error
		r, err = e.start(b, grad, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &pending{r: r}, nil
}

// Wait waits for the evaluation's chunks still on the device, copies their
// results out and returns the evaluation's sums; grad is then written.
func (p *pending) Wait() ([]tokens.TermResult, error) {
	if p.done {
		return p.res, p.r.err
	}
	p.done = true
	r := p.r
	e := r.e
	err := e.d.locked(func() error {
		if e.closed { // Close failed what r had in flight
			return nil
		}
		// In chunk order: the slot holding the earlier chunk first.
		first, second := e.slots[0], e.slots[1]
		if second.owner == r && (first.owner != r || second.pending.r0 < first.pending.r0) {
			first, second = second, first
		}
		for _, s := range []*slot{first, second} {
			if s.owner == r {
				if err := drain(s); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if r.err == nil {
		r.err = err
	}
	if r.err != nil {
		return nil, r.err
	}
	p.res = r.p.Results(r.sums)
	return p.res, nil
}

// run is one evaluation's state.
type run struct {
	e      *Evaluator
	b      *tokens.Batch
	grad   []float64
	p      *lower.Plan
	cols   [numCols][]float64
	elt    int
	sums   [][]float64
	writes []bool // per term: writes the gradient
	err    error  // the first error collecting its results
}

// start queues every chunk of the evaluation, each in the next slot after
// collecting what that slot still holds.
func (e *Evaluator) start(b *tokens.Batch, grad []float64, p *lower.Plan) (*run, error) {
	if err := e.d.module(); err != nil {
		return nil, err
	}
	if err := e.initSlots(); err != nil {
		return nil, err
	}
	r := &run{e: e, b: b, grad: grad, p: p, elt: 4, sums: make([][]float64, len(p.Terms)), writes: make([]bool, len(p.Terms))}
	if e.opt.Float64 {
		r.elt = 8
	}
	for i, t := range p.Terms {
		r.sums[i] = make([]float64, lower.MaxRed)
		r.writes[i] = writesGrad(t.Kernel)
		for c, need := range columns(t.Kernel) {
			if need {
				r.cols[c] = b.Col(columnNames[c])
			}
		}
	}
	for _, c := range r.chunks() {
		s := e.slots[e.next]
		e.next ^= 1
		if err := drain(s); err != nil {
			return nil, err
		}
		if err := r.launch(s, c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// chunks splits the batch into runs of whole rows of at most ChunkTokens
// tokens (a longer row is a chunk of its own) and lists each term's rows.
func (r *run) chunks() []*chunk {
	B := r.b.Rows.N()
	termOf := make([]int, B)
	for i := range termOf {
		termOf[i] = -1
	}
	for i, t := range r.p.Terms {
		for _, row := range t.Rows {
			termOf[row] = i
		}
	}
	var out []*chunk
	for r0 := 0; r0 < B; {
		r1 := r0 + 1
		for r1 < B && r.b.Rows.Off[r1+1]-r.b.Rows.Off[r0] <= r.e.opt.ChunkTokens {
			r1++
		}
		c := &chunk{r0: r0, r1: r1, t0: r.b.Rows.Off[r0], t1: r.b.Rows.Off[r1], termRows: make([][]int32, len(r.p.Terms))}
		for row := r0; row < r1; row++ {
			if ti := termOf[row]; ti >= 0 {
				c.termRows[ti] = append(c.termRows[ti], int32(row-r0))
			} else {
				c.zero = append(c.zero, int32(row-r0))
			}
		}
		out = append(out, c)
		r0 = r1
	}
	return out
}

func (e *Evaluator) initSlots() error {
	for i := range e.slots {
		if e.slots[i] != nil {
			continue
		}
		s := &slot{dev: map[string]devBuf{}, host: map[string]hostBuf{}}
		drv := e.d.drv
		if err := drv.call("cuStreamCreate", drv.streamCreate, uintptr(unsafe.Pointer(&s.stream)), streamNonBlocking); err != nil {
			return err
		}
		for _, ev := range []*uintptr{&s.start, &s.stop} {
			if err := drv.call("cuEventCreate", drv.eventCreate, uintptr(unsafe.Pointer(ev)), eventDefault); err != nil {
				return err
			}
		}
		e.slots[i] = s
	}
	return nil
}

// devbuf returns the slot's device buffer name with room for n bytes.
func (e *Evaluator) devbuf(s *slot, name string, n int) (devPtr, error) {
	b := s.dev[name]
	if b.n >= n && b.p != 0 {
		return b.p, nil
	}
	if err := e.d.drv.free(b.p); err != nil {
		return 0, err
	}
	delete(s.dev, name)
	p, err := e.d.drv.alloc(n)
	if err != nil {
		return 0, err
	}
	s.dev[name] = devBuf{p: p, n: n}
	return p, nil
}

// hostbuf returns the slot's pinned host buffer name with room for n bytes.
func (e *Evaluator) hostbuf(s *slot, name string, n int) (unsafe.Pointer, error) {
	b := s.host[name]
	if b.n >= n && b.p != nil {
		return b.p, nil
	}
	if err := e.d.drv.freeHost(b.p); err != nil {
		return nil, err
	}
	delete(s.host, name)
	p, err := e.d.drv.allocHost(n)
	if err != nil {
		return nil, err
	}
	s.host[name] = hostBuf{p: p, n: n}
	return p, nil
}

// errClosed is the error of an evaluation started on, or not collected
// from, a closed Evaluator.
var errClosed = errors.New("gpu: evaluator closed before the evaluation's results were collected")

// Close releases the evaluator's buffers and streams; an evaluation still
// in flight then fails (errClosed).
func (e *Evaluator) Close() error {
	return e.d.locked(func() error {
		e.closed = true
		// Results not yet collected are dropped: every owner fails before
		// any sync or free can, so that none reads partial sums as good.
		for _, s := range e.slots {
			if s != nil && s.owner != nil && s.owner.err == nil {
				s.owner.err = errClosed
			}
		}
		drv := e.d.drv
		for i, s := range e.slots {
			if s == nil {
				continue
			}
			if err := drv.sync(s.stream); err != nil {
				return err
			}
			s.pending, s.owner = nil, nil
			for _, b := range s.dev {
				if err := drv.free(b.p); err != nil {
					return err
				}
			}
			for _, b := range s.host {
				if err := drv.freeHost(b.p); err != nil {
					return err
				}
			}
			for _, ev := range []uintptr{s.start, s.stop} {
				if err := drv.call("cuEventDestroy", drv.eventDestroy, ev); err != nil {
					return err
				}
			}
			if err := drv.call("cuStreamDestroy", drv.streamDestroy, s.stream); err != nil {
				return err
			}
			e.slots[i] = nil
		}
		return nil
	})
}

// meta is the layout of a chunk's per-row data in one buffer: offsets
// (int64, rows+1), count, scale, gscale (float64, rows each), then the
// terms' row lists and the zero rows (int32).
type meta struct {
	off, count, scale, gscale int // byte offsets
	lists                     []int
	zero                      int
	size                      int
}

// layoutMeta lays out chunk c's per-row data.
func layoutMeta(c *chunk) meta {
	n := c.r1 - c.r0
	m := meta{off: 0}
	m.count = 8 * (n + 1)
	m.scale = m.count + 8*n
	m.gscale = m.scale + 8*n
	at := m.gscale + 8*n
	for _, rows := range c.termRows {
		m.lists = append(m.lists, at)
		at += 4 * len(rows)
	}
	m.zero = at
	m.size = at + 4*len(c.zero)
	return m
}

// chunkBufs are the device buffers of one launched chunk.
type chunkBufs struct {
	cols   [numCols]devPtr // the inputs read by the chunk's kernels
	ml     meta            // the layout of meta
	meta   devPtr          // the per-row data
	grad   devPtr          // the gradient, per token
	sums   devPtr          // per term, its MaxRed sums
	rowout devPtr          // per term, two values per row
	// partial holds one term's per-row partial sums, reduced into sums
	// before the next term's kernel runs.
	partial devPtr
}

// launch uploads chunk c into slot s and queues its kernels and downloads.
func (r *run) launch(s *slot, c *chunk) error {
	var b chunkBufs
	if err := r.uploadColumns(s, c, &b); err != nil {
		return err
	}
	if err := r.uploadMeta(s, c, &b); err != nil {
		return err
	}
	if err := r.allocOutputs(s, c, &b); err != nil {
		return err
	}
	if err := r.queueKernels(s, c, &b); err != nil {
		return err
	}
	if err := r.queueDownloads(s, c, &b); err != nil {
		return err
	}
	s.pending, s.owner = c, r
	return nil
}

// uploadColumns converts the chunk's tokens of each input the kernels read
// into pinned memory and queues their copies to the device.
func (r *run) uploadColumns(s *slot, c *chunk, b *chunkBufs) error {
	e, drv := r.e, r.e.d.drv
	ntok := c.t1 - c.t0
	for ci, col := range r.cols {
		if col == nil {
			continue
		}
		name := columnNames[ci]
		h, err := e.hostbuf(s, name, ntok*r.elt)
		if err != nil {
			return err
		}
		convertTo(h, col[c.t0:c.t1], r.elt)
		if b.cols[ci], err = e.devbuf(s, name, ntok*r.elt); err != nil {
			return err
		}
		if err := drv.htod(b.cols[ci], h, ntok*r.elt, s.stream); err != nil {
			return err
		}
	}
	return nil
}

// uploadMeta writes the chunk's per-row data (layoutMeta) into pinned memory
// and queues its copy to the device.
func (r *run) uploadMeta(s *slot, c *chunk, b *chunkBufs) error {
	e, drv := r.e, r.e.d.drv
	n := c.r1 - c.r0
	b.ml = layoutMeta(c)
	ml := b.ml
	hm, err := e.hostbuf(s, "meta", ml.size)
	if err != nil {
		return err
	}
	off := unsafe.Slice((*int64)(hm), n+1)
	for i := range off {
		off[i] = int64(r.b.Rows.Off[c.r0+i] - c.t0)
	}
	copy(unsafe.Slice((*float64)(unsafe.Add(hm, ml.count)), n), r.p.Count[c.r0:c.r1])
	copy(unsafe.Slice((*float64)(unsafe.Add(hm, ml.scale)), n), r.p.Scale[c.r0:c.r1])
	copy(unsafe.Slice((*float64)(unsafe.Add(hm, ml.gscale)), n), r.p.GradScale[c.r0:c.r1])
	for i, rows := range c.termRows {
		copy(unsafe.Slice((*int32)(unsafe.Add(hm, ml.lists[i])), len(rows)), rows)
	}
	copy(unsafe.Slice((*int32)(unsafe.Add(hm, ml.zero)), len(c.zero)), c.zero)
	if b.meta, err = e.devbuf(s, "meta", ml.size); err != nil {
		return err
	}
	return drv.htod(b.meta, hm, ml.size, s.stream)
}

// allocOutputs sizes the slot's device outputs for the chunk: the gradient,
// the partial sums of the term with the most rows, the terms' sums and
// per-row outputs.
func (r *run) allocOutputs(s *slot, c *chunk, b *chunkBufs) error {
	e := r.e
	n, ntok, nt := c.r1-c.r0, c.t1-c.t0, len(r.p.Terms)
	var err error
	if b.grad, err = e.devbuf(s, "grad", ntok*r.elt); err != nil {
		return err
	}
	maxRows := 0
	for _, rows := range c.termRows {
		maxRows = max(maxRows, len(rows))
	}
	if b.partial, err = e.devbuf(s, "partial", 8*lower.MaxRed*max(maxRows, 1)); err != nil {
		return err
	}
	if b.sums, err = e.devbuf(s, "sums", 8*lower.MaxRed*max(nt, 1)); err != nil {
		return err
	}
	b.rowout, err = e.devbuf(s, "rowout", 8*2*n*max(nt, 1))
	return err
}

// queueKernels queues each term's kernel over its rows, then the kernel
// zeroing the gradient of the rows no term writes, between the timing
// events when Options.Timing is set.
func (r *run) queueKernels(s *slot, c *chunk, b *chunkBufs) error {
	e, drv := r.e, r.e.d.drv
	if e.opt.Timing {
		if err := drv.call("cuEventRecord", drv.eventRecord, s.start, s.stream); err != nil {
			return err
		}
	}
	for i, rows := range c.termRows {
		if len(rows) == 0 {
			continue
		}
		if err := r.queueTerm(s, c, b, i); err != nil {
			return err
		}
	}
	if len(c.zero) > 0 {
		if err := r.queueZero(s, c, b); err != nil {
			return err
		}
	}
	if e.opt.Timing {
		return drv.call("cuEventRecord", drv.eventRecord, s.stop, s.stream)
	}
	return nil
}

// queueTerm queues term i's rows kernel over its rows of the chunk and the
// reduction of its partial sums into the term's sums.
func (r *run) queueTerm(s *slot, c *chunk, b *chunkBufs, i int) error {
	e, drv := r.e, r.e.d.drv
	n, ntok := c.r1-c.r0, c.t1-c.t0
	rows := c.termRows[i]
	t := r.p.Terms[i]
	suffix := e.opt.Float64
	if e.opt.Timing {
		e.bytes += int64(r.termTokens(c, rows)) * int64(r.elt) * int64(trafficPerToken(t.Kernel))
	}
	fn := e.d.fns[rowsKernel(t.Kernel.Kind, suffix)]
	k := t.Kernel
	dm, ml := b.meta, b.ml
	rowsPtr := dm + devPtr(ml.lists[i])
	offPtr, countPtr, scalePtr, gscalePtr := dm+devPtr(ml.off), dm+devPtr(ml.count), dm+devPtr(ml.scale), dm+devPtr(ml.gscale)
	rowout := b.rowout + devPtr(8*2*n*i)
	args := []unsafe.Pointer{unsafe.Pointer(&k), unsafe.Pointer(&offPtr), unsafe.Pointer(&rowsPtr)}
	for ci := range b.cols {
		args = append(args, unsafe.Pointer(&b.cols[ci]))
	}
	args = append(args, unsafe.Pointer(&countPtr), unsafe.Pointer(&scalePtr), unsafe.Pointer(&gscalePtr),
		unsafe.Pointer(&b.grad), unsafe.Pointer(&b.partial), unsafe.Pointer(&rowout))
	if err := drv.launch(fn, len(rows), blockSize(ntok, n), 0, s.stream, args); err != nil {
		return fmt.Errorf("%w (%s)", err, rowsKernel(t.Kernel.Kind, suffix))
	}
	nrows := int32(len(rows))
	out := b.sums + devPtr(8*lower.MaxRed*i)
	if err := drv.launch(e.d.fns["rft_finish"], lower.MaxRed, 256, 0, s.stream,
		[]unsafe.Pointer{unsafe.Pointer(&b.partial), unsafe.Pointer(&nrows), unsafe.Pointer(&out)}); err != nil {
		return fmt.Errorf("%w (rft_finish)", err)
	}
	return nil
}

// queueZero queues the kernel zeroing the gradient of the chunk's zero rows.
func (r *run) queueZero(s *slot, c *chunk, b *chunkBufs) error {
	e, drv := r.e, r.e.d.drv
	n, ntok := c.r1-c.r0, c.t1-c.t0
	if e.opt.Timing {
		e.bytes += int64(r.termTokens(c, c.zero)) * int64(r.elt)
	}
	name := "rft_zero_rows_f32"
	if e.opt.Float64 {
		name = "rft_zero_rows_f64"
	}
	offPtr, zeroPtr := b.meta+devPtr(b.ml.off), b.meta+devPtr(b.ml.zero)
	if err := drv.launch(e.d.fns[name], len(c.zero), blockSize(ntok, n), 0, s.stream,
		[]unsafe.Pointer{unsafe.Pointer(&offPtr), unsafe.Pointer(&zeroPtr), unsafe.Pointer(&b.grad)}); err != nil {
		return fmt.Errorf("%w (%s)", err, name)
	}
	return nil
}

// queueDownloads queues the copies of the chunk's gradient, sums and the
// per-row outputs of the terms that have them into pinned memory, which
// collect copies out.
func (r *run) queueDownloads(s *slot, c *chunk, b *chunkBufs) error {
	e, drv := r.e, r.e.d.drv
	n, ntok, nt := c.r1-c.r0, c.t1-c.t0, len(r.p.Terms)
	hg, err := e.hostbuf(s, "grad", ntok*r.elt)
	if err != nil {
		return err
	}
	if err := drv.dtoh(hg, b.grad, ntok*r.elt, s.stream); err != nil {
		return err
	}
	hs, err := e.hostbuf(s, "sums", 8*lower.MaxRed*max(nt, 1))
	if err != nil {
		return err
	}
	if err := drv.dtoh(hs, b.sums, 8*lower.MaxRed*nt, s.stream); err != nil {
		return err
	}
	ho, err := e.hostbuf(s, "rowout", 8*2*n*max(nt, 1))
	if err != nil {
		return err
	}
	for i, t := range r.p.Terms {
		if t.RowOut != nil && len(c.termRows[i]) > 0 {
			if err := drv.dtoh(unsafe.Add(ho, 8*2*n*i), b.rowout+devPtr(8*2*n*i), 8*2*len(c.termRows[i]), s.stream); err != nil {
				return err
			}
		}
	}
	return nil
}

// drain waits for the slot's pending chunk and copies its results out into
// the evaluation it belongs to: gradient rows of the terms that write one
// (and zero rows), sums added in chunk order, per-row outputs. An error is
// also the evaluation's, for its Wait.
func drain(s *slot) error {
	c, r := s.pending, s.owner
	if c == nil {
		return nil
	}
	s.pending, s.owner = nil, nil
	if err := r.collect(s, c); err != nil {
		if r.err == nil {
			r.err = err
		}
		return err
	}
	return nil
}

// collect is drain for chunk c of r.
func (r *run) collect(s *slot, c *chunk) error {
	drv := r.e.d.drv
	if err := drv.sync(s.stream); err != nil {
		return err
	}
	if r.e.opt.Timing {
		var ms float32
		if err := drv.call("cuEventElapsedTime", drv.eventElapsedTime, uintptr(unsafe.Pointer(&ms)), s.start, s.stop); err != nil {
			return err
		}
		r.e.kernelMs += float64(ms)
	}
	n := c.r1 - c.r0
	hg := s.host["grad"].p
	copyRows := func(rows []int32) {
		for _, row := range rows {
			lo, hi := r.b.Rows.Span(c.r0 + int(row))
			convertFrom(r.grad[lo:hi], unsafe.Add(hg, (lo-c.t0)*r.elt), r.elt)
		}
	}
	hs := unsafe.Slice((*float64)(s.host["sums"].p), lower.MaxRed*max(len(r.p.Terms), 1))
	ho := s.host["rowout"].p
	for i, t := range r.p.Terms {
		rows := c.termRows[i]
		if len(rows) == 0 {
			continue
		}
		for j := range r.sums[i] {
			r.sums[i][j] += hs[i*lower.MaxRed+j]
		}
		if r.writes[i] {
			copyRows(rows)
		}
		if t.RowOut != nil {
			out := unsafe.Slice((*float64)(unsafe.Add(ho, 8*2*n*i)), 2*len(rows))
			for j, row := range rows {
				g := c.r0 + int(row)
				t.RowOut[2*g], t.RowOut[2*g+1] = out[2*j], out[2*j+1]
			}
		}
	}
	copyRows(c.zero)
	return nil
}

// convertTo writes src into the pinned buffer dst as float32 (elt 4) or
// float64 (elt 8), in parallel for large inputs.
func convertTo(dst unsafe.Pointer, src []float64, elt int) {
	if elt == 8 {
		copy(unsafe.Slice((*float64)(dst), len(src)), src)
		return
	}
	d := unsafe.Slice((*float32)(dst), len(src))
	parallel.Spans(len(src), parallel.SpanSize, func(lo, hi int) {
		for i, x := range src[lo:hi] {
			d[lo+i] = float32(x)
		}
	})
}

// convertFrom reads len(dst) values of size elt from src into dst.
func convertFrom(dst []float64, src unsafe.Pointer, elt int) {
	if elt == 8 {
		copy(dst, unsafe.Slice((*float64)(src), len(dst)))
		return
	}
	s := unsafe.Slice((*float32)(src), len(dst))
	for i, x := range s {
		dst[i] = float64(x)
	}
}
