package trinity

import "testing"

// TestIDSpanOutside: the condition selects exactly the ids no metadata row
// read has, or gives up.
func TestIDSpanOutside(t *testing.T) {
	var s idSpan
	if s.outside("id") != "" {
		t.Fatal("an empty span must defer to the anti-join")
	}
	for _, id := range []int64{3, 4, 5, 8, 9, 12} {
		s.add(id)
	}
	if got, want := s.outside("id"), "id < 3 OR id > 12 OR (id > 5 AND id < 8) OR (id > 9 AND id < 12)"; got != want {
		t.Errorf("outside = %q, want %q", got, want)
	}
	var many idSpan
	for id := int64(0); id < 2*(maxGaps+2); id += 2 {
		many.add(id)
	}
	if many.outside("id") != "" {
		t.Error("past maxGaps gaps the span must defer to the anti-join")
	}
}
