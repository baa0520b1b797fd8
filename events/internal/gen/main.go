// Command gen writes the events package's payload codec: one msgpack
// encoder and one decoder per payload struct, generated from the struct
// definitions and the registry, so neither reflection nor a hand-kept copy
// of every field sits on the hot path; PayloadTaskID, which reads the
// "taskId" of a payload's JSON from its struct (refusing a payload whose
// JSON is not its fields', or whose "taskId" is not one plain string); and
// PayloadStringBytes, the bytes of the strings a payload holds.
//
// It reads the package's source (go/ast, no type checking), so it runs even
// when the generated file no longer compiles against changed structs.
// Run it with `go generate ./events`; TestGeneratedCodecIsCurrent fails
// when the committed output differs from what it would write now.
//
// The bytes it encodes are exactly msgpack v5's reflection encoding with
// default options (fields in declaration order, omitempty by msgpack's
// isEmptyValue, int compact, fixed-width int64 and uint32, float64 as a
// double, a nil pointer as nil); the events tests compare both for every
// payload type. Field types: string, bool, int, int64, uint32, float64,
// []string, a pointer to one of the scalars (optional: nil is absent) and a
// pointer to a struct of the package; anything else is an error, so a new
// field type is added here rather than encoded wrongly.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// outputName is the generated file, inside the events package.
const outputName = "payload_codec_gen.go"

func main() {
	dir := flag.String("dir", ".", "the events package directory")
	flag.Parse()
	src, err := generate(*dir)
	if err == nil {
		err = os.WriteFile(filepath.Join(*dir, outputName), src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// fieldKind is a Go field type the codec handles.
type fieldKind int

const (
	kindString fieldKind = iota
	kindBool
	kindInt     // int: msgpack's compact integer
	kindInt64   // int64: always 9 bytes (0xd3)
	kindUint32  // uint32: always 5 bytes (0xce); encoded, decoded by reflection
	kindFloat64 // float64: always a double (0xcb)
	kindStrings // []string
	kindStruct  // *T, T a struct of the package
)

type field struct {
	goName    string
	key       string // the msgpack key
	kind      fieldKind
	elem      string // the struct of a kindStruct
	optional  bool   // a pointer to a scalar (*int64): nil is absent
	omitEmpty bool
}

// shape is a struct definition; several payload types may share one
// (type RunQueued RunStatusChanged).
type shape struct {
	name   string
	fields []field
}

// payload is one registry entry.
type payload struct {
	constName string // TypeRunCreated
	goType    string // RunCreated
	shape     string // RunStatusChanged for RunQueued
	version   int
	taskField string // the Go field that is "taskId" in the payload's JSON; "" for none
}

type pkg struct {
	specs    map[string]ast.Expr // type name -> its definition
	shapes   map[string]*shape
	payloads []payload
	// jsonMethods are the types of the package with a MarshalJSON or
	// MarshalText method: their JSON is not their fields'.
	jsonMethods map[string]bool
}

// generate reads the events package in dir and returns the formatted codec.
func generate(dir string) ([]byte, error) {
	p, err := load(dir)
	if err != nil {
		return nil, err
	}
	for i := range p.payloads {
		pl := &p.payloads[i]
		if pl.shape, err = p.resolve(pl.goType); err != nil {
			return nil, err
		}
		if pl.taskField, err = p.taskIDField(pl.goType, pl.shape); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	p.write(&out)
	src, err := format.Source(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting the output: %w\n%s", err, out.Bytes())
	}
	return src, nil
}

func load(dir string) (*pkg, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	p := &pkg{specs: map[string]ast.Expr{}, shapes: map[string]*shape{}, jsonMethods: map[string]bool{}}
	var registry *ast.CompositeLit
	for _, name := range names {
		base := filepath.Base(name)
		if strings.HasSuffix(base, "_test.go") || base == outputName {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if f.Name.Name != "events" {
			continue
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok {
				if name := receiverType(fn); name != "" &&
					(fn.Name.Name == "MarshalJSON" || fn.Name.Name == "MarshalText") {
					p.jsonMethods[name] = true
				}
				continue
			}
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					p.specs[s.Name.Name] = s.Type
				case *ast.ValueSpec:
					if len(s.Names) == 1 && s.Names[0].Name == "registry" && len(s.Values) == 1 {
						registry, _ = s.Values[0].(*ast.CompositeLit)
					}
				}
			}
		}
	}
	if registry == nil {
		return nil, errors.New("no `var registry = map[string]kind{...}` in the package")
	}
	for _, e := range registry.Elts {
		pl, err := registryEntry(e)
		if err != nil {
			return nil, err
		}
		p.payloads = append(p.payloads, pl)
	}
	slices.SortFunc(p.payloads, func(a, b payload) int { return strings.Compare(a.constName, b.constName) })
	return p, nil
}

// registryEntry reads `TypeX: vN[T]()`.
func registryEntry(e ast.Expr) (payload, error) {
	kv, ok := e.(*ast.KeyValueExpr)
	if !ok {
		return payload{}, fmt.Errorf("registry entry %T: want Type: vN[T]()", e)
	}
	key, ok1 := kv.Key.(*ast.Ident)
	call, ok2 := kv.Value.(*ast.CallExpr)
	if !ok1 || !ok2 {
		return payload{}, errors.New("registry entry: want Type: vN[T]()")
	}
	idx, ok1 := call.Fun.(*ast.IndexExpr)
	if !ok1 {
		return payload{}, fmt.Errorf("registry entry %s: want vN[T]()", key.Name)
	}
	fn, ok1 := idx.X.(*ast.Ident)
	arg, ok2 := idx.Index.(*ast.Ident)
	if !ok1 || !ok2 || !strings.HasPrefix(fn.Name, "v") {
		return payload{}, fmt.Errorf("registry entry %s: want vN[T]()", key.Name)
	}
	v, err := strconv.Atoi(fn.Name[1:])
	if err != nil || v < 1 {
		return payload{}, fmt.Errorf("registry entry %s: %s is not a schema version constructor", key.Name, fn.Name)
	}
	return payload{constName: key.Name, goType: arg.Name, version: v}, nil
}

// resolve follows `type A B` to the struct definition and records its
// shape (and the shapes of the structs it points to).
func (p *pkg) resolve(name string) (string, error) {
	for seen := 0; seen < 16; seen++ {
		def, ok := p.specs[name]
		if !ok {
			return "", fmt.Errorf("type %s is not defined in the package", name)
		}
		switch d := def.(type) {
		case *ast.Ident:
			name = d.Name
			continue
		case *ast.StructType:
			return name, p.addShape(name, d)
		}
		return "", fmt.Errorf("type %s is not a struct", name)
	}
	return "", fmt.Errorf("type %s: too many levels of definition", name)
}

func (p *pkg) addShape(name string, st *ast.StructType) error {
	if _, ok := p.shapes[name]; ok {
		return nil
	}
	s := &shape{name: name}
	p.shapes[name] = s
	keys := map[string]bool{}
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 {
			return fmt.Errorf("%s: embedded fields are not supported", name)
		}
		tag := ""
		if f.Tag != nil {
			raw, err := strconv.Unquote(f.Tag.Value)
			if err != nil {
				return fmt.Errorf("%s: tag %s: %w", name, f.Tag.Value, err)
			}
			tag = reflect.StructTag(raw).Get("msgpack")
		}
		key, opts, _ := strings.Cut(tag, ",")
		if key == "-" {
			continue
		}
		omit := false
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "":
			case "omitempty":
				omit = true
			default:
				return fmt.Errorf("%s: msgpack tag option %q is not supported", name, o)
			}
		}
		typ, optional := f.Type, false
		if star, ok := typ.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && scalars[id.Name] {
				typ, optional = id, true
			}
		}
		kind, elem, err := p.kindOf(name, typ)
		if err != nil {
			return err
		}
		for _, n := range f.Names {
			if !n.IsExported() {
				continue // msgpack skips unexported fields
			}
			k := key
			if k == "" {
				k = n.Name
			}
			if keys[k] {
				return fmt.Errorf("%s: key %q twice", name, k)
			}
			keys[k] = true
			s.fields = append(s.fields, field{goName: n.Name, key: k, kind: kind, elem: elem, optional: optional,
				omitEmpty: omit})
		}
	}
	if len(s.fields) > 64 {
		return fmt.Errorf("%s: more than 64 fields (fieldSet is a uint64)", name)
	}
	return nil
}

// receiverType is the type a method is declared on ("" for a function).
func receiverType(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) != 1 {
		return ""
	}
	t := fn.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// taskIDField returns the field of payload type goType (a struct of
// definition shape) that encoding/json writes as "taskId", "" when none
// does. It refuses what it cannot read as encoding/json would write it: a
// payload with JSON methods of its own, a "taskId" that is not a plain
// string field, or two of them.
func (p *pkg) taskIDField(goType, shape string) (string, error) {
	if p.jsonMethods[goType] {
		return "", fmt.Errorf("%s: a payload with its own JSON encoding is not supported "+
			"(its taskId could not be read from its fields)", goType)
	}
	st := p.specs[shape].(*ast.StructType)
	found := ""
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			raw, err := strconv.Unquote(f.Tag.Value)
			if err != nil {
				return "", fmt.Errorf("%s: tag %s: %w", shape, f.Tag.Value, err)
			}
			tag = reflect.StructTag(raw).Get("json")
		}
		key, opts, _ := strings.Cut(tag, ",")
		for _, n := range f.Names {
			k := key
			if k == "" {
				k = n.Name
			}
			if !n.IsExported() || key == "-" || k != "taskId" {
				continue
			}
			id, ok := f.Type.(*ast.Ident)
			if !ok || id.Name != "string" || slices.Contains(strings.Split(opts, ","), "string") || found != "" {
				return "", fmt.Errorf("%s: its \"taskId\" is not one plain string field", shape)
			}
			found = n.Name
		}
	}
	return found, nil
}

// scalars are the field types that may also be optional (*int64).
var scalars = map[string]bool{"string": true, "bool": true, "int": true, "int64": true, "uint32": true,
	"float64": true}

func (p *pkg) kindOf(owner string, t ast.Expr) (fieldKind, string, error) {
	switch t := t.(type) {
	case *ast.Ident:
		switch t.Name {
		case "string":
			return kindString, "", nil
		case "bool":
			return kindBool, "", nil
		case "int":
			return kindInt, "", nil
		case "int64":
			return kindInt64, "", nil
		case "uint32":
			return kindUint32, "", nil
		case "float64":
			return kindFloat64, "", nil
		}
	case *ast.ArrayType:
		if id, ok := t.Elt.(*ast.Ident); ok && t.Len == nil && id.Name == "string" {
			return kindStrings, "", nil
		}
	case *ast.StarExpr:
		if id, ok := t.X.(*ast.Ident); ok {
			if def, ok := p.specs[id.Name]; ok {
				if st, ok := def.(*ast.StructType); ok {
					return kindStruct, id.Name, p.addShape(id.Name, st)
				}
			}
		}
	}
	var b bytes.Buffer
	_ = format.Node(&b, token.NewFileSet(), t)
	return 0, "", fmt.Errorf("%s: field type %s is not supported by the generator (add it to events/internal/gen)",
		owner, b.String())
}

// decodable reports whether the fast reader handles every field of s (and
// of the structs it points to); the others decode by reflection.
func (p *pkg) decodable(s *shape) bool {
	for _, f := range s.fields {
		switch f.kind {
		case kindUint32:
			return false
		case kindStruct:
			if !p.decodable(p.shapes[f.elem]) {
				return false
			}
		}
	}
	return true
}

func (p *pkg) write(w *bytes.Buffer) {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	pf("// Code generated by events/internal/gen from the payload structs and the registry; DO NOT EDIT.\n\n")
	pf("package events\n\n")

	pf("// appendPayload appends p, a payload struct or a pointer to one, to b as\n")
	pf("// msgpack; ok is false when p is not a payload.\n")
	pf("func appendPayload(b []byte, p any) (_ []byte, ok bool) {\n\tswitch p := p.(type) {\n")
	for _, pl := range p.payloads {
		conv := func(v string) string {
			if pl.shape == pl.goType {
				return v
			}
			return fmt.Sprintf("(*%s)(%s)", pl.shape, v)
		}
		pf("\tcase *%s:\n\t\tif p == nil {\n\t\t\treturn append(b, 0xc0), true\n\t\t}\n", pl.goType)
		pf("\t\treturn append%s(b, %s), true\n", pl.shape, conv("p"))
		pf("\tcase %s:\n\t\treturn append%s(b, %s), true\n", pl.goType, pl.shape, conv("&p"))
	}
	pf("\t}\n\treturn b, false\n}\n\n")

	pf("// PayloadTaskID returns the \"taskId\" of the JSON of p, a payload struct or\n")
	pf("// a pointer to one, as encoding/json writes it (\"\" when the payload has\n")
	pf("// none, or p is a nil pointer); ok is false when p is not a payload. A\n")
	pf("// reader of an event's taskId needs neither reflection nor a parse of the\n")
	pf("// JSON. (A function, not a TaskID method: the field is named TaskID.) NB:\n")
	pf("// the value is the field's; encoding/json would write a string that is not\n")
	pf("// valid UTF-8 with U+FFFD in place of each bad byte.\n")
	pf("func PayloadTaskID(p any) (taskID string, ok bool) {\n\tswitch p := p.(type) {\n")
	var none []string
	seen := map[string]bool{}
	for _, pl := range p.payloads {
		if seen[pl.goType] {
			continue
		}
		seen[pl.goType] = true
		if pl.taskField == "" {
			none = append(none, "*"+pl.goType, pl.goType)
			continue
		}
		pf("\tcase *%s:\n\t\tif p == nil {\n\t\t\treturn \"\", true\n\t\t}\n\t\treturn p.%s, true\n", pl.goType,
			pl.taskField)
		pf("\tcase %s:\n\t\treturn p.%s, true\n", pl.goType, pl.taskField)
	}
	if len(none) > 0 {
		pf("\tcase %s:\n\t\treturn \"\", true\n", strings.Join(none, ", "))
	}
	pf("\t}\n\treturn \"\", false\n}\n\n")

	pf("// PayloadStringBytes returns the bytes of every string p, a payload struct\n")
	pf("// or a pointer to one, holds (its fields, the elements of its lists and the\n")
	pf("// strings of the structs it points to; 0 for a nil pointer); ok is false\n")
	pf("// when p is not a payload. It is what an event adds to its run's bytes\n")
	pf("// quota (TextBytes), read without reflection.\n")
	pf("func PayloadStringBytes(p any) (n int64, ok bool) {\n\tswitch p := p.(type) {\n")
	seen = map[string]bool{}
	for _, pl := range p.payloads {
		if seen[pl.goType] {
			continue
		}
		seen[pl.goType] = true
		conv := func(v string) string {
			if pl.shape == pl.goType {
				return v
			}
			return fmt.Sprintf("(*%s)(%s)", pl.shape, v)
		}
		pf("\tcase *%s:\n\t\tif p == nil {\n\t\t\treturn 0, true\n\t\t}\n\t\treturn stringBytes%s(%s), true\n",
			pl.goType, pl.shape, conv("p"))
		pf("\tcase %s:\n\t\treturn stringBytes%s(%s), true\n", pl.goType, pl.shape, conv("&p"))
	}
	pf("\t}\n\treturn 0, false\n}\n\n")

	pf("// payloadDecoders decodes the current schema version of every payload\n")
	pf("// type whose fields the fast reader handles.\n")
	pf("var payloadDecoders = map[string]payloadDecoder{\n")
	for _, pl := range p.payloads {
		if !p.decodable(p.shapes[pl.shape]) {
			pf("\t// %s: decoded by reflection (a field type the fast reader does not take).\n", pl.constName)
			continue
		}
		read := fmt.Sprintf("r.read%s(p)", pl.shape)
		if pl.shape != pl.goType {
			read = fmt.Sprintf("r.read%s((*%s)(p))", pl.shape, pl.shape)
		}
		pf("\t%s: {version: %d, decode: func(r *fastReader) any {\n\t\tp := new(%s)\n\t\t%s\n\t\treturn p\n\t}},\n",
			pl.constName, pl.version, pl.goType, read)
	}
	pf("}\n\n")

	names := make([]string, 0, len(p.shapes))
	for n := range p.shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p.writeEncoder(pf, p.shapes[n])
		p.writeStringBytes(pf, p.shapes[n])
		if p.decodable(p.shapes[n]) {
			p.writeDecoder(pf, p.shapes[n])
		}
	}
}

// keyPrefix is the msgpack encoding of a key, as a Go string literal.
func keyPrefix(k string) string {
	var h []byte
	switch n := len(k); {
	case n < 32:
		h = []byte{0xa0 | byte(n)}
	case n < 256:
		h = []byte{0xd9, byte(n)}
	default:
		h = []byte{0xda, byte(n >> 8), byte(n)}
	}
	return strconv.Quote(string(h) + k)
}

// present is the negation of msgpack's isEmptyValue for the field, as a Go
// condition: an omitempty field is written when it holds.
func present(f field) string {
	v := "p." + f.goName
	if f.optional {
		return v + " != nil"
	}
	switch f.kind {
	case kindString, kindStrings:
		return "len(" + v + ") != 0"
	case kindBool:
		return v
	case kindStruct:
		return v + " != nil"
	}
	return v + " != 0" // NB: NaN is not empty, -0 is, as in msgpack
}

func (p *pkg) writeEncoder(pf func(string, ...any), s *shape) {
	pf("func append%s(b []byte, p *%s) []byte {\n", s.name, s.name)
	fixed := 0
	for _, f := range s.fields {
		if !f.omitEmpty {
			fixed++
		}
	}
	if fixed == len(s.fields) {
		pf("\tb = appendMapLen(b, %d)\n", fixed)
	} else {
		pf("\tn := %d\n", fixed)
		for _, f := range s.fields {
			if f.omitEmpty {
				pf("\tif %s {\n\t\tn++\n\t}\n", present(f))
			}
		}
		pf("\tb = appendMapLen(b, n)\n")
	}
	for _, f := range s.fields {
		v := "p." + f.goName
		if f.optional {
			v = "*" + v
		}
		var enc string
		switch f.kind {
		case kindStruct:
			enc = fmt.Sprintf("if %s == nil {\n\t\tb = append(b, 0xc0)\n\t} else {\n\t\tb = append%s(b, %s)\n\t}",
				v, f.elem, v)
		case kindInt:
			enc = fmt.Sprintf("b = appendInt(b, int64(%s))", v)
		default:
			enc = fmt.Sprintf("b = %s(b, %s)", writeFunc[f.kind], v)
		}
		if f.optional && !f.omitEmpty {
			enc = fmt.Sprintf("if p.%s == nil {\n\t\tb = append(b, 0xc0)\n\t} else {\n\t\t%s\n\t}", f.goName, enc)
		}
		if f.omitEmpty {
			if f.kind == kindStruct {
				enc = fmt.Sprintf("b = append%s(b, %s)", f.elem, v)
			}
			pf("\tif %s {\n\t\tb = append(b, %s...)\n\t\t%s\n\t}\n", present(f), keyPrefix(f.key), enc)
		} else {
			pf("\tb = append(b, %s...)\n\t%s\n", keyPrefix(f.key), enc)
		}
	}
	pf("\treturn b\n}\n\n")
}

// writeStringBytes writes stringBytes<shape>, the sum of the lengths of
// the strings a value of s holds (PayloadStringBytes).
func (p *pkg) writeStringBytes(pf func(string, ...any), s *shape) {
	var terms, nested []string
	for _, f := range s.fields {
		v := "p." + f.goName
		switch {
		case f.kind == kindString && f.optional:
			nested = append(nested, fmt.Sprintf("if %s != nil {\n\t\tn += int64(len(*%s))\n\t}", v, v))
		case f.kind == kindString:
			terms = append(terms, "len("+v+")")
		case f.kind == kindStrings:
			nested = append(nested, fmt.Sprintf("for _, s := range %s {\n\t\tn += int64(len(s))\n\t}", v))
		case f.kind == kindStruct:
			nested = append(nested, fmt.Sprintf("if %s != nil {\n\t\tn += stringBytes%s(%s)\n\t}", v, f.elem, v))
		}
	}
	if len(terms) == 0 && len(nested) == 0 {
		pf("func stringBytes%s(*%s) int64 { return 0 }\n\n", s.name, s.name)
		return
	}
	pf("func stringBytes%s(p *%s) int64 {\n", s.name, s.name)
	if len(nested) == 0 {
		pf("\treturn int64(%s)\n}\n\n", strings.Join(terms, " + "))
		return
	}
	if len(terms) == 0 {
		pf("\tvar n int64\n")
	} else {
		pf("\tn := int64(%s)\n", strings.Join(terms, " + "))
	}
	for _, x := range nested {
		pf("\t%s\n", x)
	}
	pf("\treturn n\n}\n\n")
}

func (p *pkg) writeDecoder(pf func(string, ...any), s *shape) {
	pf("func (r *fastReader) read%s(p *%s) {\n\tvar seen fieldSet\n", s.name, s.name)
	pf("\tfor n := r.mapLen(); n > 0 && r.ok(); n-- {\n\t\tswitch r.key() {\n")
	for i, f := range s.fields {
		pf("\t\tcase %s:\n\t\t\tr.once(&seen, %d)\n", strconv.Quote(f.key), i)
		v := "p." + f.goName
		switch {
		case f.kind == kindStruct:
			// nil stays nil, anything else is a new struct, as
			// reflection decodes a pointer.
			pf("\t\t\tif r.peekNil() {\n\t\t\t\t%s = nil\n\t\t\t} else {\n\t\t\t\t%s = new(%s)\n\t\t\t\tr.read%s(%s)\n\t\t\t}\n",
				v, v, f.elem, f.elem, v)
		case f.optional:
			// Likewise for a pointer to a scalar.
			pf("\t\t\tif r.peekNil() {\n\t\t\t\t%s = nil\n\t\t\t} else {\n\t\t\t\tv := %s\n\t\t\t\t%s = &v\n\t\t\t}\n",
				v, readExpr[f.kind], v)
		default:
			pf("\t\t\t%s = %s\n", v, readExpr[f.kind])
		}
	}
	pf("\t\tdefault:\n\t\t\tr.skip()\n\t\t}\n\t}\n}\n\n")
}

// writeFunc is the fastwrite.go function that writes a kind.
var writeFunc = map[fieldKind]string{
	kindString: "appendString", kindBool: "appendBool", kindInt64: "appendInt64", kindUint32: "appendUint32",
	kindFloat64: "appendFloat64", kindStrings: "appendStrings",
}

// readExpr reads a value of a kind the fast reader takes, as the field's
// Go type.
var readExpr = map[fieldKind]string{
	kindString: "r.str()", kindBool: "r.bool()", kindInt: "int(r.int())", kindInt64: "r.int()",
	kindFloat64: "r.float()", kindStrings: "r.strs()",
}
