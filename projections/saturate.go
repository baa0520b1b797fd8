package projections

import "math"

// SaturatingAdd returns a + b, stopping at math.MaxInt64 or math.MinInt64
// instead of wrapping around. Token sums use it: an overflow that wrapped
// would turn a huge spend into a negative one and hand the budget back.
func SaturatingAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
