package daemon

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

func TestOpenErrorNamesTheWayOut(t *testing.T) {
	data := filepath.Join("var", "crewlog")
	err := openError(data, &eventlog.FormatError{Store: 1, Supported: 2})
	require.ErrorIs(t, err, eventlog.ErrFormatTooOld)
	require.Contains(t, err.Error(), "is at format 1 and this crewd needs format 2")
	require.Contains(t, err.Error(), "crewctl migrate --data "+data)

	err = openError(data, &eventlog.FormatError{Store: 3, Supported: 2})
	require.ErrorIs(t, err, eventlog.ErrFormatTooNew)
	require.Contains(t, err.Error(), "is at format 3, newer than format 2")
}
