package job

// suggest returns the candidate closest to word by edit distance, or "" when
// none is close enough to be a plausible typo (distance at most 1 for short
// words, 2 from 5 characters, a third of the length beyond).
func suggest(word string, candidates []string) string {
	limit := 1
	if n := len([]rune(word)); n >= 5 {
		limit = max(2, n/3)
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, counted in
// runes, with an adjacent transposition counting as one edit (optimal string
// alignment), the commonest typo.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// Three rolling rows: i-2, i-1, i.
	prev2 := make([]int, len(y)+1)
	prev := make([]int, len(y)+1)
	cur := make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(y)]
}
