package fastmath

// logistic32 is the scalar form of LogisticSlice32 where the vector functions do not run.
func logistic32(x float32) float32 {
	if x >= 0 {
		return 1 / (1 + Exp32(-x))
	}
	e := Exp32(x)
	return e / (1 + e)
}
