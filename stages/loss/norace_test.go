//go:build !race

package loss

// nanPayloads: the vector loops keep the compiled Go loops' operand order,
// so even a NaN's payload is the same (race_test.go says when it is not).
const nanPayloads = true
