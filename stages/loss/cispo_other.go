//go:build !amd64 || purego || amd64.v3

package loss

// vectorCISPO is false: the token loop of (*CISPO).Row is the Go loop only.
var vectorCISPO = false

// cispoVector is not called where vectorCISPO is false.
func cispoVector(_ *cispoTokens, from int, s cispoSums) (int, cispoSums) { return from, s }
