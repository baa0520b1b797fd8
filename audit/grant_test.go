package audit

import "encoding/json"

// grantOf is a job's grant of the named tools, each described as the tool manager lists it: the grant every test of
// the job decisions here hands job.create, lease.open and manifest.revalidate.
func grantOf(names ...string) json.RawMessage {
	tools := make([]any, len(names))
	for i, name := range names {
		tools[i] = map[string]any{"name": name, "label": name, "description": name, "parameters": map[string]any{},
			"callable": "mgr:" + name, "sourceInfo": map[string]any{"path": "/t", "source": "pi", "scope": "user",
				"origin": "package"}}
	}
	b, err := json.Marshal(tools)
	if err != nil {
		panic(err)
	}
	return b
}
