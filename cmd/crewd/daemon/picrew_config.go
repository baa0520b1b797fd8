package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// picrewKeys maps the keys of a pi-crew config file that crewd reads (D§2.10) to its own settings. The other
// keys of pi-crew's nesting and broker schemas are known but mean nothing to crewd: broker.enabled (crewd is the
// broker) and broker.pathHashLen (crewd's socket is --socket).
var picrewKeys = map[string]string{
	"nesting.enabled":           "nesting",
	"nesting.maxDepth":          "max-depth",
	"nesting.maxSlots":          "max-slots",
	"broker.waitMethodsEnabled": "wait-methods",
	"broker.maxFrameBytes":      "max-frame",
	"broker.outboundQueueCap":   "outbound-queue-cap",
}

var picrewIgnored = []string{"broker.enabled", "broker.pathHashLen"}

// readPicrewConfig returns the nesting.* and broker.* settings of a pi-crew config file as flag texts, by crewd
// setting name. A key pi-crew's schema does not have in those sections is reported (a warning, as pi-crew's
// validation does), and so is a key crewd does not use; a value of the wrong type is an error. The file's other
// sections are pi-crew's own business and are not read.
func readPicrewConfig(path string) (vals map[string]string, warnings []string, errs []error) {
	data, err := readSettingsFile("pi-crew config", path)
	if err != nil {
		return nil, nil, []error{err}
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&top); err != nil || top == nil || dec.More() {
		return nil, nil, []error{fmt.Errorf("daemon: pi-crew config %s: not one JSON object", path)}
	}
	vals = map[string]string{}
	for _, section := range []string{"nesting", "broker"} {
		raw, ok := top[section]
		if !ok || string(raw) == "null" {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) != nil || fields == nil {
			errs = append(errs, fmt.Errorf("daemon: pi-crew config %s: %s must be an object", path, section))
			continue
		}
		keys := make([]string, 0, len(fields))
		for k := range fields {
			keys = append(keys, k)
		}
		slices.Sort(keys) // report in a stable order
		for _, k := range keys {
			key := section + "." + k
			name, known := picrewKeys[key]
			switch {
			case slices.Contains(picrewIgnored, key):
				warnings = append(warnings, fmt.Sprintf("pi-crew config %s: %s does not apply to crewd; ignored", path, key))
				continue
			case !known:
				warnings = append(warnings, fmt.Sprintf("pi-crew config %s: unknown key %s; ignored", path, key))
				continue
			}
			o, _ := lookupOption(name)
			text, err := jsonText(o.kind, fields[k])
			if err != nil {
				errs = append(errs, fmt.Errorf("daemon: pi-crew config %s: %s: %w", path, key, err))
				continue
			}
			vals[name] = text
		}
	}
	return vals, warnings, errs
}
