//go:build !amd64 || purego || amd64.v3

package loss

// vectorCISPO is false: the token loop of (*CISPO).Row is the Go loop only.
var vectorCISPO = false

// vector is not called where vectorCISPO is false.
func (*cispoTokens) vector(from int, s cispoSums) (int, cispoSums) { return from, s }
