//go:build !amd64 || purego || amd64.v3

package loss

// vectorSAPO is false: the token loop of (*SAPO).Row is the Go loop only.
var vectorSAPO = false

// sapoVector is not called where vectorSAPO is false.
func sapoVector(_ *sapoTokens, from int, s sapoSums) (int, sapoSums) { return from, s }
