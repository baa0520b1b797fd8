package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// eventsDir is the events package, two levels up from here.
var eventsDir = filepath.Join("..", "..")

// TestGeneratedCodecIsCurrent fails when a payload struct or the registry
// changed and the codec was not regenerated: run `go generate ./events`.
func TestGeneratedCodecIsCurrent(t *testing.T) {
	want, err := generate(eventsDir)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(eventsDir, outputName))
	require.NoError(t, err)
	require.True(t, string(want) == string(got),
		"%s is stale: run `go generate ./events` and commit the result", outputName)
}

func TestGenerateRefusesWhatItCannotEncode(t *testing.T) {
	dir := t.TempDir()
	src := `package events

type kind struct{}

func v1[T any]() kind { return kind{} }

const TypeOdd = "odd.thing"

type Odd struct {
	Weights map[string]int ` + "`msgpack:\"weights\"`" + `
}

var registry = map[string]kind{TypeOdd: v1[Odd]()}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "odd.go"), []byte(src), 0o644))
	_, err := generate(dir)
	require.ErrorContains(t, err, "field type map[string]int is not supported")
}
