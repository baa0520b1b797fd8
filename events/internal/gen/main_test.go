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

// The taskId reader is generated only for what it reads as encoding/json
// writes it: a payload with JSON methods of its own, or a "taskId" that is
// not one plain string field, is refused rather than read wrongly.
func TestGenerateRefusesATaskIDItCannotRead(t *testing.T) {
	for _, c := range []struct{ name, decl, want string }{
		{"custom JSON",
			"type Odd struct {\n\tTaskID string `json:\"taskId\" msgpack:\"taskId\"`\n}\n\n" +
				"func (Odd) MarshalJSON() ([]byte, error) { return nil, nil }\n",
			"its own JSON encoding"},
		{"number", "type Odd struct {\n\tTaskID int `json:\"taskId\" msgpack:\"taskId\"`\n}\n",
			"not one plain string field"},
		{"string option", "type Odd struct {\n\tTaskID string `json:\"taskId,string\" msgpack:\"taskId\"`\n}\n",
			"not one plain string field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			src := "package events\n\ntype kind struct{}\n\nfunc v1[T any]() kind { return kind{} }\n\n" +
				"const TypeOdd = \"odd.thing\"\n\n" +
				c.decl + "\nvar registry = map[string]kind{TypeOdd: v1[Odd]()}\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "odd.go"), []byte(src), 0o644))
			_, err := generate(dir)
			require.ErrorContains(t, err, c.want)
		})
	}
}
