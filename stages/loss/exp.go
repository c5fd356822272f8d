package loss

import "github.com/rftpipe/rftpipe/stages/internal/fastexp"

// exp is fastexp.Exp (e^x within about 1.5 ulp).
func exp(x float64) float64 { return fastexp.Exp(x) }
