package gpu

import (
	_ "embed"

	"github.com/rftpipe/rftpipe/gpu/internal/lower"
)

// The kernel sources (gpu/kernels), compiled by NVRTC at first use.
var (
	//go:embed kernels/rft_loss.cu
	kernelSource string
	//go:embed kernels/rft_loss.h
	kernelHeader string
)

// numKinds is the number of kernel kinds rft_loss.cu instantiates.
const numKinds = lower.NumKinds
