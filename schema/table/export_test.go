package table

// SetCommitPoint sets the function a commit calls at each of its points.
func SetCommitPoint(f func(point string)) { commitPoint = f }
