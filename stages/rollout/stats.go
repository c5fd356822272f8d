package rollout

import "math"

// f32frac is a fraction computed as torch's float32 mean of 0/1 values:
// float32(k)/float32(n), exactly (spec "(f32)" metrics).
func f32frac(k, n int) float64 { return float64(float32(k) / float32(n)) }

// sel is masked_sum's select-then-multiply for one value.
func sel(v, m float64) float64 {
	if m == 0 {
		return 0
	}
	return v * m
}

// b2f is Iverson's bracket.
func b2f(c bool) float64 {
	if c {
		return 1
	}
	return 0
}

// clamp is torch.clamp: NaN stays NaN (as with Go's min and max, which
// compile to branch-free code).
func clamp(x, lo, hi float64) float64 { return min(max(x, lo), hi) }

// extrema is a running max and min with torch's NaN propagation (a NaN
// operand makes both NaN).
type extrema struct {
	max, min float64
	n        int
}

func (e *extrema) add(x float64) {
	switch {
	case e.n == 0 || x != x:
		e.max, e.min = x, x
	case e.max == e.max:
		if x > e.max {
			e.max = x
		}
		if x < e.min {
			e.min = x
		}
	}
	e.n++
}

func (e *extrema) merge(o extrema) {
	if o.n == 0 {
		return
	}
	n := e.n + o.n
	e.add(o.max)
	e.add(o.min)
	e.n = n
}

// series summarises a list of row values: count, sum (for the mean, in
// order), Welford's mean and M2 (for the unbiased std), extrema, the max of
// |v − dev| and counts above hi and below lo.
type series struct {
	n         int
	sum       float64
	mean, m2  float64
	ext       extrema
	maxDev    extrema
	high, low int
}

func (s *series) add(v, dev, hi, lo float64) {
	s.n++
	s.sum += v
	d := v - s.mean
	s.mean += d / float64(s.n)
	s.m2 += d * (v - s.mean)
	s.ext.add(v)
	s.maxDev.add(math.Abs(v - dev))
	if v > hi {
		s.high++
	}
	if v < lo {
		s.low++
	}
}

// merge appends o (Chan et al.'s parallel variance).
func (s *series) merge(o series) {
	if o.n == 0 {
		return
	}
	n := s.n + o.n
	d := o.mean - s.mean
	s.m2 += o.m2 + d*d*float64(s.n)*float64(o.n)/float64(n)
	s.mean += d * float64(o.n) / float64(n)
	s.n = n
	s.sum += o.sum
	s.ext.merge(o.ext)
	s.maxDev.merge(o.maxDev)
	s.high += o.high
	s.low += o.low
}

// avg is mean over the rows (NaN for none, as torch's mean of an empty tensor).
func (s *series) avg() float64 { return s.sum / float64(s.n) }

// std is the unbiased standard deviation, 0 for fewer than two values.
func (s *series) std() float64 {
	if s.n < 2 {
		return 0
	}
	return math.Sqrt(s.m2 / float64(s.n-1))
}

// moments are the masked sums of the one-pass *_std metrics and the
// eff_sample_size: Σ x·m and Σ x²·m over valid tokens.
type moments struct{ s1, s2 float64 }

func (m *moments) add(x, w float64) {
	m.s1 += x * w
	m.s2 += x * x * w
}

func (m *moments) merge(o moments) { m.s1 += o.s1; m.s2 += o.s2 }

// std is verl's sqrt(max(0, masked_mean(x²) − masked_mean(x)²)) over n
// valid tokens (0 when n ≤ 1).
func (m moments) std(n float64) float64 {
	if !(n > 1) {
		return 0
	}
	mx := m.s1 / (n + eps)
	return math.Sqrt(math.Max(0, m.s2/(n+eps)-mx*mx))
}
