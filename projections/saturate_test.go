package projections

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSaturatingAddNeverWraps(t *testing.T) {
	require.Equal(t, int64(5), SaturatingAdd(2, 3))
	require.Equal(t, int64(math.MaxInt64), SaturatingAdd(math.MaxInt64, 1))
	require.Equal(t, int64(math.MaxInt64), SaturatingAdd(1<<62, 1<<62))
	require.Equal(t, int64(math.MinInt64), SaturatingAdd(math.MinInt64, -1))
	require.Equal(t, int64(-1), SaturatingAdd(1, -2))
}
