package advantage

// keptGroups returns the groups of p with at least one kept row, in order.
func keptGroups(p *Plan) []int32 {
	var kept []int32
	for g := 0; g < p.Groups.Len(); g++ {
		for _, r := range p.Groups.Group(g) {
			if p.Keep[r] {
				kept = append(kept, int32(g))
				break
			}
		}
	}
	return kept
}

// RefillGroups is grpo's duplication (POLARIS): every group left empty by the
// filter is replaced by a copy of a kept group drawn uniformly with
// replacement (rng.IntN over the kept groups, one draw per empty group, in
// group order). The copies keep their eids. Nothing is added when no
// group or every group was dropped. It appends to p.Dups.
func RefillGroups(p *Plan, rng *RNG) {
	kept := keptGroups(p)
	skipped := p.Groups.Len() - len(kept)
	if len(kept) == 0 || skipped == 0 {
		return
	}
	for k := 0; k < skipped; k++ {
		p.Dups = append(p.Dups, Dup{Group: kept[rng.IntN(len(kept))]})
	}
}

// RefillRows is the old duplicate_informative refill: while fewer than total
// rows are written, append a copy of the next kept group, taken from the END
// of a queue of the kept groups; the first queue is in group order, each
// later one is a fresh shuffle (Shuffle with rng). The copies of round k
// (k = 1, 2, …) get eid.task += k × (number of groups), so they form new
// groups. The row count may overshoot total by up to one group size − 1.
func RefillRows(p *Plan, total int, rng *RNG) {
	kept := keptGroups(p)
	if len(kept) == 0 {
		return
	}
	size := make(map[int32]int, len(kept))
	count := 0
	for _, g := range kept {
		for _, r := range p.Groups.Group(int(g)) {
			if p.Keep[r] {
				size[g]++
			}
		}
		count += size[g]
	}
	G := int64(p.Groups.Len())
	offset := G
	queue := append([]int32(nil), kept...)
	for count < total {
		if len(queue) == 0 {
			queue = append(queue, kept...)
			Shuffle(rng, queue, len(queue))
			offset += G
		}
		g := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		p.Dups = append(p.Dups, Dup{Group: g, TaskOffset: offset})
		count += size[g]
	}
}
