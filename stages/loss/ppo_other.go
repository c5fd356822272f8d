//go:build !amd64 || purego || amd64.v3

package loss

// vectorPPO is false: the token loop of (*PPO).Row is the Go loop only.
var vectorPPO = false

// ppoVector is not called where vectorPPO is false.
func ppoVector(*ppoTokens) (int, ppoSums) { return 0, ppoSums{} }
